"""cp_vs_nocp: context-parallel runs (cp 2 and 4, each cp_style the engine offers) give the same
per-token log-probs, loss, count and every gradient as the single-process run.

Rows are built so that documents straddle every shard cut, one document exactly fills a shard, a
length-1 document sits right before a cut, and a document starts exactly at one; an extra arm
uses a sequence length cp does not divide (the engine must pad or refuse, never split unevenly).
Boundaries that go local per shard, RoPE positions restarting per shard (MRoPE positions too, on
a vision-language family, whose samples hold images), counts taken per shard or over the wrong
group, and uneven shards all move some quantity here.
"""

from __future__ import annotations

from packcheck.harness.contract import UNPACKED, ParallelPlan, packed
from packcheck.harness.contract.parallel import CP_STYLES
from packcheck.harness.data.samples import CP_CUTS, CP_CUTS_SEQ_LEN
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing

SINGLE = "single"
INDIVISIBLE_SEQ_LEN = 50  # not a multiple of 4


def build(setting: Setting) -> dict:
    samples = samples_for(setting, CP_CUTS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(CP_CUTS_SEQ_LEN))}
    for cp in (2, 4):
        for style in CP_STYLES:
            name = f"cp{cp}_{style}"
            arms[name] = arm(setting, name, samples, packed(CP_CUTS_SEQ_LEN), parallel=ParallelPlan(cp=cp, cp_style=style))
    for style in CP_STYLES:
        arms[f"cp2_{style}_unpacked"] = arm(setting, f"cp2_{style}_unpacked", samples, UNPACKED, parallel=ParallelPlan(cp=2, cp_style=style))
        arms[f"cp4_{style}_seq{INDIVISIBLE_SEQ_LEN}"] = arm(
            setting, f"cp4_{style}_seq{INDIVISIBLE_SEQ_LEN}", samples, packed(INDIVISIBLE_SEQ_LEN), parallel=ParallelPlan(cp=4, cp_style=style))
    return arms


def judge(j: Judgement) -> list:
    return every_arm_against(j, SINGLE)


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if failing(failed, "logprobs"):
        return (
            "per-token log-probs change under context parallelism: a document straddling a shard cut is not one document "
            "(boundaries or RoPE positions computed per shard), or the key/value exchange misses part of the sequence"
        )
    if failing(failed, "num_loss_tokens"):
        c = failing(failed, "num_loss_tokens")[0]
        return f"the loss-token count changes under context parallelism ({c.where}): counted per shard, or reduced over the wrong group"
    return "log-probs and counts agree but the loss or gradients do not: the per-rank loss scaling or the gradient reduction over the CP group is wrong"


CP_VS_NOCP = Scenario(
    name="cp_vs_nocp",
    invariant="cp 2 and 4 (ulysses, ring; packed, unpacked, indivisible lengths) give the single-process log-probs, loss, count and every gradient",
    catches=("local-seq-lens-under-cp", "cp-uneven-shards", "verl-cp-undercount", "gdn-cp-conv-shard-reset",
             "mrope-cp-positions"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset({f"cp{cp}_{style}" for cp in (2, 4) for style in CP_STYLES}
                            | {f"cp2_{style}_unpacked" for style in CP_STYLES}
                            | {f"cp4_{style}_seq{INDIVISIBLE_SEQ_LEN}" for style in CP_STYLES}),
    disk_arms=9,
)
