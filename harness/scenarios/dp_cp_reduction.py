"""dp_cp_reduction: on dp x cp meshes where WORLD is not the data-parallel group (dp1 x cp2,
dp2 x cp2) and on pure data parallelism with uneven token counts per rank (including a rank whose
micro-batches hold no loss token at all), the loss, the loss-token count and every gradient equal
the single-process run's. Empty parts contribute exactly zero: besides the data-parallel rank
without tokens, a cp2 arm starts with a micro-batch of two short documents (6 tokens) in a 48-token
row, so its second shard holds only padding (the short document padded to the CP length of
Megatron-LM #1764), and a loss divided per shard by its own count is 0 / 0 there.

A count all-reduced over WORLD instead of the DP group is cp times too large; one taken per
shard is cp times too small; a rank that skips a collective because it has nothing to train
leaves the others waiting.
"""

from __future__ import annotations

from packcheck.harness.contract import ParallelPlan, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.router_diagnosis import router_diagnosis
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing

SEQ_LEN = 48
SINGLE = "single"
EMPTY_SAMPLE = 4  # SKEWED_LENGTHS[4] is a fully masked length-1 sample
SHORT_SAMPLES = (1, 8)  # SKEWED_LENGTHS[1], [8]: 2 + 4 tokens, all in the first half of a 48-token row
MESHES = {
    "dp1_cp2_ulysses": (ParallelPlan(cp=2, cp_style="ulysses"), Partition.single_rank([range(len(SKEWED_LENGTHS))])),
    "dp2_cp1_uneven": (ParallelPlan(dp=2), Partition(per_rank=(((0, 7), (1, 2, 3)), ((5, 6, 8), (EMPTY_SAMPLE,))))),
    "dp2_cp1_rank_without_tokens": (ParallelPlan(dp=2), Partition(per_rank=(((0, 1, 2, 3, 5, 6, 7, 8),), ((EMPTY_SAMPLE,),)))),
    "dp2_cp2_ring": (ParallelPlan(dp=2, cp=2, cp_style="ring"), Partition(per_rank=(((0, 7, 1),), ((2, 3, 4, 5, 6, 8),)))),
    "dp1_cp2_empty_shard": (ParallelPlan(cp=2, cp_style="ring"), Partition.single_rank([SHORT_SAMPLES, (0, 2, 3, 4, 5, 6, 7)])),
}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN))}
    for name, (plan, partition) in MESHES.items():
        arms[name] = arm(setting, name, samples, packed(SEQ_LEN), partition, parallel=plan)
    return arms


def judge(j: Judgement) -> list:
    return every_arm_against(j, SINGLE)


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if moe := router_diagnosis(failed):
        return moe
    counts = failing(failed, "num_loss_tokens")
    if counts:
        arms = sorted({c.arms.arm.name for c in counts})
        return (
            f"the global loss-token count is wrong on {', '.join(arms)} ({counts[0].where}): reduced over WORLD instead of the "
            "data-parallel group (too large by cp), or counted per context-parallel shard (too small by cp)"
        )
    if failing(failed, "logprobs"):
        return "log-probs change with the mesh: the forward sees the data/context split"
    return "counts and log-probs agree but the loss or gradients do not: a per-rank loss scale or the gradient reduction (sum over dp x cp) is wrong"


DP_CP_REDUCTION = Scenario(
    name="dp_cp_reduction",
    invariant="dp x cp meshes (WORLD != DP group; uneven ranks, a rank and a CP shard with no loss token) give the single-process loss, count and every gradient",
    catches=("dp-count-world-group", "verl-cp-undercount", "rank-skips-step-without-tokens", "moe-router-counts-local", "cp-empty-shard-nan"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES),
    disk_arms=6,
)
