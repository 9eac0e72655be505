"""rl_loss_aggregation: every aggregation mode of the PPO/GRPO loss equals its definition over the
global batch, whatever the micro-batch partition and the layout.

A rollout arm gives the engine's own log-probs; the policy arms (the second stage) take their old
log-probs from it, shifted per token so the ratio lands in every branch of the clipped surrogate
(harness/data/rl.py), with per-sample and per-token advantages of both signs. Lengths are skewed,
rows hold several documents, one sample is fully masked. Per mode, every arm is judged against
the definition as the harness evaluates it at the engine's own log-probs (harness/compare/policy.py),
and every arm but `one` against `one` of its terms (loss, count, weights, every gradient):
- `clip/{one, one_unpacked, uneven, uneven_unpacked}` (asymmetric clip, dual clip): loss, every token's weight, and the exact set
  of clipped tokens, whose weight is exactly 0;
- `kl/{one, one_unpacked}` (+ k3 KL): loss and weights with the penalty's value and derivative;
- `kl+entropy/{one, uneven, cp2_ulysses}` (+ entropy bonus, which the harness cannot evaluate without the
  whole distribution): weights with the entropy held fixed, and the size of the entropy term;
- distributed arms (optional: skipped, with the reason, by an engine without DP/CP):
  `clip/dp2_uneven` (two DP ranks, uneven token and sequence counts, the fully masked sample on one),
  `clip/dp2_cp2_ring`, `kl+entropy/cp2_ulysses`: the sequence count G and the token count N are
  global, so each must be all-reduced over the DP group (only) before the first backward.
"""

from __future__ import annotations

from typing import Mapping

from packcheck.harness.compare import HARNESS, Arms, compare_results
from packcheck.harness.compare.rounding_bound import between_arms
from packcheck.harness.contract import (
    SINGLE_PROCESS,
    UNPACKED,
    Aggregation,
    Case,
    Layout,
    LayoutKind,
    LossSpec,
    ParallelPlan,
    Partition,
    StepResult,
    packed,
)
from packcheck.harness.data.rl import off_policy_samples, rollout_samples
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.router_diagnosis import router_diagnosis
from packcheck.harness.scenarios.base import Before, Scenario, Stage, from_setting
from packcheck.harness.scenarios.building import COUNT_MISMATCH, against_definition, failing

SEQ_LEN = 48
ROLLOUT = "rollout"
UNEVEN = Partition.single_rank([(0, 7), (1, 2, 4), (3, 5, 6, 8)])
# Dr.GRPO's constant: unlike seq_len (48) and the longest sample (44), so a normaliser read off the batch shape shows.
NORM_CONSTANT = 64.0
# An asymmetric clip range (clip-higher) so that swapping clip_low and clip_high moves tokens, and
# ratios in every branch: below the range, inside, inside only because clip_high > clip_low, above,
# above the dual clip. Each is >= 0.15 nats from a boundary: layout noise never moves a token across.
CLIP = dict(clip_low=0.2, clip_high=0.8, dual_clip=4.0)
RATIOS = (0.5, 1.0, 1.4, 2.5, 6.0)
TERMS = {
    "clip": CLIP,
    "kl": CLIP | dict(kl_coef=0.1),
    "kl+entropy": CLIP | dict(kl_coef=0.1, entropy_coef=0.05),
}
# Uneven across ranks too: rank 1 holds the fully masked sample 4 among fewer, longer ones.
DP_UNEVEN = Partition(per_rank=(((0, 7), (1, 2, 4)), ((3, 5), (6, 8))))
DP_CP_UNEVEN = Partition(per_rank=(((0, 7, 1),), ((2, 3, 4, 5, 6, 8),)))
SHAPES = {  # shape -> (layout, partition, parallel plan); every arm is compared with the "one" of its mode and terms
    "one": (packed(SEQ_LEN), None, SINGLE_PROCESS),
    "one_unpacked": (UNPACKED, None, SINGLE_PROCESS),  # the padded arms' own baseline, for an engine that never packs
    "uneven": (packed(SEQ_LEN), UNEVEN, SINGLE_PROCESS),
    "uneven_unpacked": (UNPACKED, UNEVEN, SINGLE_PROCESS),
    "dp2_uneven": (packed(SEQ_LEN), DP_UNEVEN, ParallelPlan(dp=2)),
    "dp2_cp2_ring": (packed(SEQ_LEN), DP_CP_UNEVEN, ParallelPlan(dp=2, cp=2, cp_style="ring")),
    "cp2_ulysses": (packed(SEQ_LEN), None, ParallelPlan(cp=2, cp_style="ulysses")),
}
SHAPES_BY_TERMS = {
    "clip": ("one", "one_unpacked", "uneven", "uneven_unpacked", "dp2_uneven", "dp2_cp2_ring"),
    "kl": ("one", "one_unpacked"),
    "kl+entropy": ("one", "uneven", "cp2_ulysses"),  # the entropy of logits sharded along the sequence
}
DISTRIBUTED_SHAPES = frozenset(shape for shape, (_, _, plan) in SHAPES.items() if plan.world_size > 1)


def loss_spec(mode: Aggregation, terms: str) -> LossSpec:
    norm = NORM_CONSTANT if mode is Aggregation.SEQ_MEAN_TOKEN_SUM_NORM else None
    return LossSpec(kind="ppo_clip", aggregation=mode, norm_constant=norm, **TERMS[terms])


def arm_name(mode: Aggregation, terms: str, shape: str) -> str:
    return f"{mode.value}/{terms}/{shape}"


# every policy arm -> the (mode, terms, shape) it is built from
POLICY_ARMS = {arm_name(mode, terms, shape): (mode, terms, shape)
               for mode in Aggregation for terms, shapes in SHAPES_BY_TERMS.items() for shape in shapes}
# every policy arm -> the `one` arm of its mode and terms, which it is compared with
ONE_OF = {name: arm_name(mode, terms, "one") for name, (mode, terms, _) in POLICY_ARMS.items()}
# ... or, for `uneven_unpacked` when `one` did not run (an engine that never packs), `one_unpacked`
UNPACKED_BASELINE = {arm_name(mode, terms, "uneven_unpacked"): arm_name(mode, terms, "one_unpacked")
                     for mode in Aggregation for terms, shapes in SHAPES_BY_TERMS.items() if "uneven_unpacked" in shapes}


def baseline_of(name: str, ran) -> str | None:
    """The arm `name` is compared with: its mode's `one` if it ran, else its padded baseline if that ran."""
    for candidate in (ONE_OF[name], UNPACKED_BASELINE.get(name)):
        if candidate in ran and candidate != name:
            return candidate
    return None


def build(setting: Setting) -> dict:
    samples = rollout_samples(samples_for(setting, SKEWED_LENGTHS))
    return {ROLLOUT: arm(setting, ROLLOUT, samples, UNPACKED, loss=LossSpec(kind="ppo_clip"))}


def policy_arm(setting: Setting, results: Mapping[str, StepResult], mode: Aggregation, terms: str, shape: str,
               layout: Layout, partition: Partition | None, parallel: ParallelPlan = SINGLE_PROCESS) -> Case:
    """The arm `mode/terms/shape`, its old log-probs made from the rollout's (the conformance suite adds shapes)."""
    samples = off_policy_samples(samples_for(setting, SKEWED_LENGTHS), results[ROLLOUT].logprobs, RATIOS, seed=setting.seed)
    name = arm_name(mode, terms, shape)
    return arm(setting, name, samples, layout, partition, loss=loss_spec(mode, terms), parallel=parallel)


def policy_arms(setting: Setting, before: Before) -> dict:
    return {name: policy_arm(setting, before.results, mode, terms, shape, *SHAPES[shape]) for name, (mode, terms, shape) in POLICY_ARMS.items()}


def judge(j: Judgement) -> list:
    rows = []
    for name, result in j.results.items():  # skipped optional arms have no result
        if name == ROLLOUT:
            continue
        rows += against_definition(j, name)
        one = baseline_of(name, j.results)
        if one is not None:  # the arms' weights follow from their own log-probs: the rounding term at `one`'s (rounding_bound.py)
            rows += compare_results(Arms(name, one), result, j.results[one], j.tolerance, j.locate(name),
                                    definition=between_arms(j.cases[one], j.results[one]))
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    if moe := router_diagnosis(failed):
        return moe
    names = sorted({c.arms.arm.name for c in failed})
    arms = [j.cases[name] for name in names]
    modes = ", ".join(sorted({case.loss.aggregation.value for case in arms}))
    if failing(failed, "logprobs"):
        return (f"[{modes}] per-token log-probs differ between layouts or partitions: the forward itself depends on how "
                "samples are packed (see packed_vs_unpacked), so no loss built on them can be right")
    if failing(failed, "num_loss_tokens"):
        return f"[{modes}] {COUNT_MISMATCH}"
    if failing(failed, "clipped_set"):
        return (f"[{modes}] the engine clips other tokens than the definition: its ratio uses other old log-probs, "
                "other clip bounds, or the min/max of the surrogate is inverted")
    if all(case.parallel.cp > 1 for case in arms):
        return (f"[{modes}] only the context-parallel arms break the definition: a per-sample quantity (|S_i|, the "
                "tokens a seq-mean-token-mean divides a sequence by) is counted in this rank's shard of the row, not "
                "over the whole sample across the CP group")
    if all(case.parallel.world_size > 1 for case in arms):
        return (f"[{modes}] only the distributed arms break the definition: a global count (the sequences G of the "
                "seq-mean modes, the tokens N of token-mean) is this rank's own, or all-reduced over the wrong group "
                "(WORLD instead of DP), instead of summed over the data-parallel group before the first backward")
    against_definition = [j.cases[c.arms.arm.name] for c in failed if c.arms.against == HARNESS]
    if against_definition and all(case.layout.kind is not LayoutKind.UNPACKED for case in against_definition):
        return (f"[{modes}] packed arms break the definition, unpacked arms do not: a per-sample quantity (a sequence's "
                "token mean or token count) is computed over the packed row instead of per sample")
    if any(POLICY_ARMS[name][2] in ("one", "one_unpacked") for name in names):
        return (f"[{modes}] even with one micro-batch the loss differs from its global definition: wrong normaliser "
                "(for seq-mean-token-sum-norm: not the constant loss.norm_constant, e.g. the padded length of the batch)")
    return (f"[{modes}] the loss or its gradients depend on how the batch is cut into micro-batches: the normaliser is "
            "taken per micro-batch (a token-mean over the micro-batch, a Dr.GRPO constant that depends on the "
            "micro-batch size) instead of over the global batch")


RL_LOSS_AGGREGATION = Scenario(
    name="rl_loss_aggregation",
    invariant="every PPO/GRPO aggregation mode (token-mean, seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm) "
              "equals its global definition, token by token, for uneven partitions, packed and unpacked",
    catches=("rl-token-mean-scope", "drgrpo-constant", "seq-mean-over-row", "rl-seq-count-per-rank",
             "rl-seq-tokens-per-shard", "moe-router-counts-local"),
    stages=(from_setting(build), Stage(build=policy_arms)),
    judge=judge,
    diagnose=diagnose,
    # every policy arm is judged against the definition on its own and against the baseline of its mode (baseline_of)
    # when that ran: an engine is judged on the modes, terms and layouts it declares (TRL's GRPOTrainer never packs)
    optional_arms=frozenset(ONE_OF),
    disk_arms=45,
)
