"""token_conservation: the engine's global loss-token count equals the harness's, nothing is
dropped or truncated, and the loss is the mean over exactly those tokens.

The samples are chosen so that one fills a packed row exactly, two fill the next exactly, one
overflows into a new row and the last row is a partial tail pack; a sample of the tail pack or
an overflow sample that goes missing shows up as a lower count (or missing log-probs), padding or
boundary targets in the loss as a higher one. A data-parallel arm checks the count summed over
two ranks with uneven shares.
"""

from __future__ import annotations

from packcheck.harness.compare import compare_count, compare_loss_with_logprobs
from packcheck.harness.contract import UNPACKED, LayoutKind, ParallelPlan, Partition, packed
from packcheck.harness.data.samples import CONSERVATION, CONSERVATION_SEQ_LEN
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.evidence import counted_fewer
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting

DP_ARM = "packed_dp2"


def build(setting: Setting) -> dict:
    samples = samples_for(setting, CONSERVATION)
    layout = packed(CONSERVATION_SEQ_LEN)
    return {
        "packed": arm(setting, "packed", samples, layout),
        "packed_micro": arm(setting, "packed_micro", samples, layout, Partition.single_rank([(0, 1, 2), (3, 4, 5, 6, 7)])),
        "unpacked": arm(setting, "unpacked", samples, UNPACKED),
        DP_ARM: arm(setting, DP_ARM, samples, layout, Partition(per_rank=(((0, 1, 2),), ((3, 4, 5, 6, 7),))), parallel=ParallelPlan(dp=2)),
    }


def judge(j: Judgement) -> list:
    rows = []
    for name, result in j.results.items():
        rows.append(compare_count(j.cases[name], result, name))
        rows.append(compare_loss_with_logprobs(j.cases[name], result, j.tolerance, name))
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    for c in failed:
        if c.quantity == "num_loss_tokens" and counted_fewer(j, c.arms.arm):
            return "the engine counted fewer loss tokens than the batch has: samples (a tail pack, overflow) dropped or truncated"
        if c.quantity == "num_loss_tokens":
            only_packed = all(j.cases[f.arms.arm.name].layout.kind is LayoutKind.PACKED for f in failed if f.quantity == "num_loss_tokens")
            what = "boundary targets (a label crossing documents) or padding" if only_packed else "padding tokens"
            return f"the engine counted more loss tokens than the batch has: {what} in the loss"
    return "the reported loss is not the mean over the harness's supervised tokens"


TOKEN_CONSERVATION = Scenario(
    name="token_conservation",
    invariant="the global loss-token count equals the harness's, every sample is returned whole, and the loss averages exactly those tokens",
    catches=("tail-pack-dropped", "pad-in-loss", "boundary-label"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset({"packed", "packed_micro", "unpacked", DP_ARM}),  # each arm is judged on its own
    disk_arms=4,
)
