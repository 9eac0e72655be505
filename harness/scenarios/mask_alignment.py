"""mask_alignment: the (sample, position) pairs in the engine's loss are exactly the harness's.

The engine's set is read from `dloss_dlogprobs` (the tokens it backpropagated through, and with
what weight); engines that do not report it are checked through the loss their own log-probs
imply, which catches a wrong set but cannot say which tokens. Edge cases: first target masked,
fully masked samples, length-1 and length-2 documents, multi-turn masks; padded intermediates on
both sides, because unpadding a left-padded mask is where slicing bugs live (the left arms are
optional: an engine that cannot pad on the left is judged on the rest).
"""

from __future__ import annotations

from packcheck.harness.compare import compare_loss_with_logprobs, compare_supervised_set
from packcheck.harness.contract import Layout, LayoutKind, packed
from packcheck.harness.data.samples import MASK_EDGE_CASES
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting

SEQ_LEN = 40


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MASK_EDGE_CASES)
    arms = {}
    for side in ("left", "right"):
        arms[f"packed_{side}"] = arm(setting, f"packed_{side}", samples, packed(SEQ_LEN, padding_side=side))
        arms[f"unpacked_{side}"] = arm(setting, f"unpacked_{side}", samples, Layout(kind=LayoutKind.UNPACKED, padding_side=side))
    return arms


def judge(j: Judgement) -> list:
    rows = []
    for name, result in j.results.items():
        case = j.cases[name]
        rows.append(compare_loss_with_logprobs(case, result, j.tolerance, name))
        if result.dloss_dlogprobs is not None:
            rows += compare_supervised_set(case, result, j.tolerance, j.locate(name), name)
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):  # the token-set lines live there, shared with every scenario
        return shared
    return "the reported loss is not the mean negative log-prob over the loss mask: tokens outside the mask (padding, boundaries) are in it, or some are missing"


MASK_ALIGNMENT = Scenario(
    name="mask_alignment",
    invariant="the engine's loss covers exactly the harness's supervised (sample, position) set, each token weighted -1/N",
    catches=("mask-slice-misalign", "boundary-label"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    # every arm is judged on its own: an engine that only pads on the right (TRL's collator, verl's padded
    # path) or never packs is judged on the arms it runs; the skipped ones are named in the verdict
    optional_arms=frozenset({"packed_left", "packed_right", "unpacked_left", "unpacked_right"}),
    disk_arms=4,
)
