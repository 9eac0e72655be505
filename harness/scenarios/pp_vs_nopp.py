"""pp_vs_nopp: pipeline-parallel runs (pp 2, 3 and 4 stages, and pp2 x dp2) give the same per-token log-probs,
loss, count and every gradient as the single-process run.

Rows are multi-document: short documents packed behind long ones (a 40-token document then 2- and 3-token ones; a
31-token one then a length-1 and a 12-token one), so a stage whose layers attend across documents, or rotate by
positions that run on across them, moves log-probs and gradients by O(1). Each rank runs two micro-batches, so the
schedule interleaves stages and micro-batches; pp2 x dp2 gives its data-parallel ranks uneven token counts (4 ranks).
pp 3 and 4 have middle stages that hold decoder layers (tiny models have at least 4 units: embedding, 2 layers,
head); pp2 has none, so a bug confined to middle stages (Megatron-Bridge #2952: they never received the packed rows'
boundaries) fails pp3 and pp4 only, which the diagnosis reads. Every arm takes optimizer_step's AdamW step with
clipping, so the global gradient norm and the parameters after the step (whole on every stage) are compared too.
"""

from __future__ import annotations

from packcheck.harness.contract import ParallelPlan, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing
from packcheck.harness.scenarios.optimizer_step import OPTIMIZER

SEQ_LEN = 48
SINGLE = "single"
# SKEWED_LENGTHS: 0: 40, 1: 2, 2: 3, 3: 31, 4: 1 (no target), 5: 12, 6: 6, 7: 44, 8: 4 tokens
TWO_MICRO_BATCHES = Partition.single_rank([(0, 1, 2, 5, 6), (3, 4, 8, 7)])
UNEVEN_DP2 = Partition(per_rank=(((0, 1, 2), (3, 4, 5)), ((7, 8), (6,))))
MESHES = {
    "pp2": (ParallelPlan(pp=2), TWO_MICRO_BATCHES),
    "pp3": (ParallelPlan(pp=3), TWO_MICRO_BATCHES),
    "pp4": (ParallelPlan(pp=4), TWO_MICRO_BATCHES),
    "pp2_dp2": (ParallelPlan(pp=2, dp=2), UNEVEN_DP2),
}
WITH_MIDDLE_STAGES = frozenset(name for name, (plan, _) in MESHES.items() if plan.pp > 2)


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN), optimizer=OPTIMIZER)}
    for name, (plan, partition) in MESHES.items():
        arms[name] = arm(setting, name, samples, packed(SEQ_LEN), partition, parallel=plan, optimizer=OPTIMIZER)
    return arms


def judge(j: Judgement) -> list:
    return every_arm_against(j, SINGLE)


def diagnose(j: Judgement, failed: list) -> str:
    wrong = {c.arms.arm.name for c in failing(failed)}
    if wrong and wrong <= WITH_MIDDLE_STAGES:
        return (
            f"only the arms with middle pipeline stages ({', '.join(sorted(wrong))}) differ, pp2 agrees: the middle stages run "
            "with other boundaries than the first and last (the packed rows' position/segment ids, cu_seqlens, not delivered "
            "to every stage: Megatron-Bridge #2952), so their layers attend across documents"
        )
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if failing(failed, "logprobs"):
        return f"per-token log-probs change under pipeline parallelism ({', '.join(sorted(wrong))}): a stage runs other layers, " \
               "boundaries or inputs than the unsplit model (the activations sent between stages, or the stage split)"
    if failing(failed, "num_loss_tokens"):
        return "the loss-token count changes under pipeline parallelism: counted per stage, or reduced over the pipeline group too"
    return (
        "log-probs and counts agree but the loss or gradients do not: the backward's send/recv between stages (an activation "
        "gradient lost or misrouted), or the stage gradient reduction (the pipeline group's sum, DDP over each stage's data group)"
    )


PP_VS_NOPP = Scenario(
    name="pp_vs_nopp",
    invariant="pp 2, 3, 4 and pp2 x dp2 (two micro-batches per rank, multi-document rows) give the single-process log-probs, loss, "
              "count, every gradient and the parameters after a clipped AdamW step",
    catches=("pp-middle-stage-boundaries",),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES),
    disk_arms=5,
)
