"""tp_vs_notp: tensor-parallel runs (tp 2 packed and unpacked, and dp 2 x tp 2 with uneven token counts per
data-parallel rank) give the same per-token log-probs, loss, count and every gradient as the single-process run.

Each layer's weights are split over the ranks of a TP group that see the same tokens (attention by heads, the MLP
along its inner dimension, the lm_head along the vocabulary: docs/distributed.md); rows hold several documents of
skewed lengths. A wrong row/column split or vocab-parallel softmax moves the log-probs; logits already gathered to
the whole vocabulary and fed to a vocab-parallel cross-entropy (Megatron-LM #7452) add log(tp) to every token's loss
and drop the label's term from part of the gradient; an all-reduce missing from (or doubled in) a region's backward
moves the gradients alone. The gradients are compared whole (the engine gathers its slices), so a slice reported in
place of the tensor, or a replicated gradient left partial on one rank, fails too. The harness also checks that every
rank of a TP arm exchanged with its TP peers at least once per attention layer (harness/collectives/mesh_use.py):
an engine that ignores the plan and runs every rank whole is flagged, not passed.
"""

from __future__ import annotations

import math

from packcheck.harness.contract import UNPACKED, ParallelPlan, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing

SEQ_LEN = 48
SINGLE = "single"
TP = 2
# uneven: rank 0 trains 40 + 44 then 2 + 3 + 31 tokens' documents, rank 1 12 + 6 + 4 then a fully masked one
DP_UNEVEN = Partition(per_rank=(((0, 7), (1, 2, 3)), ((5, 6, 8), (4,))))
MESHES = {
    f"tp{TP}": (ParallelPlan(tp=TP), packed(SEQ_LEN), None),
    f"tp{TP}_unpacked": (ParallelPlan(tp=TP), UNPACKED, None),
    f"dp2_tp{TP}": (ParallelPlan(dp=2, tp=TP), packed(SEQ_LEN), DP_UNEVEN),
}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN))}
    for name, (plan, layout, partition) in MESHES.items():
        arms[name] = arm(setting, name, samples, layout, partition, parallel=plan)
    return arms


def judge(j: Judgement) -> list:
    return every_arm_against(j, SINGLE)


def loss_off_by_log_tp(j: Judgement, failed: list) -> list[str]:
    """The TP arms whose loss exceeds the single run's by log(tp), to a millionth."""
    arms = sorted({c.arms.arm.name for c in failing(failed, "loss")})
    base = j.results[SINGLE].loss
    return [name for name in arms
            if math.isclose(j.results[name].loss - base, math.log(j.cases[name].parallel.tp), rel_tol=1e-6)]


def diagnose(j: Judgement, failed: list) -> str:
    if shifted := loss_off_by_log_tp(j, failed):
        return (f"the loss of {', '.join(shifted)} is the single run's plus log(tp) and every log-prob is log(tp) lower: logits "
                "already gathered to the whole vocabulary are fed to a vocab-parallel cross-entropy, which all-reduces their "
                "sum of exps over the TP group once more (tp times too large) and finds the label on one rank only "
                "(Megatron-LM #7452: gather_output / runtime_gather_output with labels)")
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if failing(failed, "logprobs"):
        return ("per-token log-probs change under tensor parallelism: a layer's row/column split is wrong (heads, kv heads or "
                "the MLP's inner dimension cut other than the weights'), the partial sums of a row-parallel layer are not "
                "all-reduced, or the vocab-parallel softmax (max, sum of exps, the label's logit over the TP group) is wrong")
    if failing(failed, "num_loss_tokens"):
        c = failing(failed, "num_loss_tokens")[0]
        return f"the loss-token count changes under tensor parallelism ({c.where}): reduced over the TP ranks too (they share tokens)"
    if failing(failed, "loss"):
        return "log-probs agree but the loss does not: the loss is summed over the TP ranks, which hold the same tokens"
    return ("log-probs, loss and counts agree but gradients do not: an all-reduce missing from (or doubled in) a TP region's "
            "backward (copy to the region: all-reduce in backward; reduce from it: identity), a vocab-parallel cross-entropy "
            "whose backward all-reduces, a replicated parameter's partial gradient (qk-norm) not summed over TP, or the "
            "slices gathered wrongly into the reported tensors")


TP_VS_NOTP = Scenario(
    name="tp_vs_notp",
    invariant="tp 2 (packed, unpacked) and dp 2 x tp 2 (uneven ranks) give the single-process log-probs, loss, count and every gradient",
    catches=("tp-gathered-logits-vocab-parallel-ce",),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES),
    disk_arms=4,
)
