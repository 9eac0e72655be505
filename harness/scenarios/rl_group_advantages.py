"""rl_group_advantages: an engine that computes its own GRPO advantages (LossSpec.advantage) gives every sample the
advantage of its reward within its group, found by the group id alone: the order of the rows, interleaved groups,
a partial group, a group of one and a split over micro-batches and ranks change nothing.

The samples (MASK_EDGE_CASES) carry a reward and a group id instead of advantages (harness/contract/advantage.py), in
groups of 4, 2, 2 and 1 with non-consecutive ids: a full group holding the two samples with no loss token (their
rewards still count in its statistics), a partial group, a partial group of equal rewards (advantage 0) and a group
of one (advantage 0, never NaN). A rollout arm gives the engine's own log-probs, so every arm is on-policy (ratio 1,
nothing clips) and each sample's gradient is its advantage times its tokens' weights. The arms hold the same samples:
`grouped` (each group's samples adjacent) and `interleaved` (round robin over the groups), unpacked, and optional ones
an engine may lack the layout or the mesh for, packed: `shuffled_micro_batches` (the rows in another order, cut into
three micro-batches across groups), `dp2` (two data-parallel ranks splitting groups) and `dr_grpo` (Dr.GRPO's
mean-centred advantages, interleaved). Each arm is judged against the harness's own advantages from (reward, group)
(the reported `advantages`; the loss and every token's weight at them; the count), and every GRPO
arm against `grouped`, its samples put back in `grouped`'s order: log-probs, loss, count, weights and every gradient.
Groups found by position (AReaL #1419's fixed stride, `reshape(-1, group_size)`) already fail `grouped`; groups taken
as runs of adjacent samples fail `interleaved` (prime-rl PR #600); advantages normalised per micro-batch or per rank
fail only the split arms.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from packcheck.harness.compare import Arms, compare_results
from packcheck.harness.compare.advantages import compare_advantages
from packcheck.harness.compare.rounding_bound import between_arms
from packcheck.harness.contract import (
    SINGLE_PROCESS,
    UNPACKED,
    AdvantageEstimator,
    LossSpec,
    ParallelPlan,
    Partition,
    StepResult,
    packed,
)
from packcheck.harness.data.rl import grouped_samples, rollout_samples
from packcheck.harness.data.samples import MASK_EDGE_CASES
from packcheck.harness.engines import Capabilities
from packcheck.harness.judging.cases import arm, positions, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Before, Scenario, Stage, from_setting
from packcheck.harness.scenarios.building import COUNT_MISMATCH, against_definition, failing

SEQ_LEN = 40  # MASK_EDGE_CASES' rows (PACKED_AT)
ROLLOUT = "rollout"
BASELINE = "grouped"
# MASK_EDGE_CASES' samples (lengths 9, 6, 1, 2, 21, 13, 3, 17, 8 at seed 0; samples 1 and 2 have no loss token) by
# group. Dyadic rewards: every mean is exact, so an equal-reward group's r - mean is exactly 0 however it is summed.
GROUPS = (7, 7, 7, 7, 3, 3, 20, 20, 11)
REWARDS = (1.0, 0.0, 0.25, 1.0, 0.0, 1.0, 0.5, 0.5, 1.0)
INTERLEAVED = (0, 4, 6, 8, 1, 5, 7, 2, 3)  # round robin over the groups: the case's samples in this order
ORDERS = {"interleaved": INTERLEAVED, "dr_grpo": INTERLEAVED}  # the other arms keep grouped's order (their partitions move rows)
SHUFFLED_MICRO_BATCHES = Partition.single_rank([(5, 8, 1), (6, 3, 0, 7), (4, 2)])  # groups 7 and 3 cut
DP2 = Partition(per_rank=(((5, 0), (8, 2)), ((3, 6, 1), (7, 4))))  # groups 7 and 3 on both ranks
GRPO = LossSpec(kind="ppo_clip", advantage=AdvantageEstimator.GRPO)
DR_GRPO = LossSpec(kind="ppo_clip", advantage=AdvantageEstimator.DR_GRPO)
ARMS = {  # arm -> (layout, partition over grouped's sample indices, parallel plan, loss)
    BASELINE: (UNPACKED, None, SINGLE_PROCESS, GRPO),
    "interleaved": (UNPACKED, None, SINGLE_PROCESS, GRPO),
    "shuffled_micro_batches": (packed(SEQ_LEN), SHUFFLED_MICRO_BATCHES, SINGLE_PROCESS, GRPO),
    "dp2": (packed(SEQ_LEN), DP2, ParallelPlan(dp=2), GRPO),
    "dr_grpo": (packed(SEQ_LEN), None, SINGLE_PROCESS, DR_GRPO),  # judged against the harness only: another estimator's loss
}
SPLIT = frozenset({"shuffled_micro_batches", "dp2"})


def order(setting: Setting, name: str) -> list[int] | None:
    """The arm's samples as positions in grouped's (the samples the setting keeps), or None: grouped's own order."""
    full = ORDERS.get(name)
    return None if full is None else [position for _, position in positions(setting, full)]


def build(setting: Setting) -> dict:
    samples = rollout_samples(samples_for(setting, MASK_EDGE_CASES))
    return {ROLLOUT: arm(setting, ROLLOUT, samples, UNPACKED, loss=LossSpec(kind="ppo_clip"))}


def policy_arms(setting: Setting, before: Before) -> dict:
    if ROLLOUT not in before.results:
        return {}
    kept = [i for i, _ in positions(setting, range(len(MASK_EDGE_CASES)))]
    grouped = grouped_samples(samples_for(setting, MASK_EDGE_CASES), before.results[ROLLOUT].logprobs,
                              [REWARDS[i] for i in kept], [GROUPS[i] for i in kept])
    arms = {}
    for name, (layout, partition, parallel, loss) in ARMS.items():
        ordered = order(setting, name)
        samples = grouped if ordered is None else [grouped[i] for i in ordered]
        arms[name] = arm(setting, name, samples, layout, partition, loss=loss, parallel=parallel)
    return arms


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    if AdvantageEstimator.GRPO not in capabilities.advantage_estimators:
        return ("the engine computes no GRPO advantages of its own from rewards and groups (Capabilities.advantage_estimators), "
                "which rl_group_advantages judges")
    return None


def in_grouped_order(result: StepResult, ordered: list[int]) -> StepResult:
    """An arm's result with its per-sample reports put back in grouped's sample order."""
    def back(values):
        if values is None:
            return None
        out = [None] * len(ordered)
        for position, i in enumerate(ordered):
            out[i] = values[position]
        return out

    advantages = None if result.advantages is None else result.advantages[[ordered.index(i) for i in range(len(ordered))]]
    return dataclasses.replace(result, logprobs=back(result.logprobs), dloss_dlogprobs=back(result.dloss_dlogprobs), advantages=advantages)


def against_grouped(j: Judgement, name: str) -> list:
    """Everything the arm must share with grouped, compared sample by sample in grouped's order."""
    ordered = order(j.setting, name)
    result, locate = j.results[name], j.locate(name)
    if ordered is not None:
        result = in_grouped_order(result, ordered)
        locate = lambda sample, token: j.locate(name)(ordered.index(sample), token)  # noqa: E731
    baseline = j.results[BASELINE]
    return compare_results(Arms(name, BASELINE), result, baseline, j.tolerance, locate,
                           definition=between_arms(j.cases[BASELINE], baseline))


def judge(j: Judgement) -> list:
    rows = []
    for name, result in j.results.items():  # skipped optional arms have no result
        if name == ROLLOUT:
            continue
        # on-policy nothing clips: a token weighing 0 here has a zero advantage, which the advantage and weight rows name
        rows += [c for c in against_definition(j, name) if c.quantity != "clipped_set"]
        if result.advantages is not None:
            rows.append(compare_advantages(j.cases[name], result, j.tolerance, name))
        if name != BASELINE and BASELINE in j.results and j.cases[name].loss == GRPO:
            rows += against_grouped(j, name)
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed):
        return shared
    if failing(failed, "logprobs"):
        return ("per-token log-probs differ between arms that hold the same samples in another order or layout: the forward "
                "depends on the packing (see packed_vs_unpacked), so no advantage check can stand on it")
    if failing(failed, "num_loss_tokens"):
        return COUNT_MISMATCH
    wrong = sorted({c.arms.arm.name for c in failing(failed, "advantages")})
    if wrong:
        if BASELINE in wrong:
            how = ("even in grouped, where each group's samples are adjacent: groups found by position with a fixed group size "
                   "(a stride, reshape(-1, group_size): a partial group or a group of one takes its neighbours' rewards, a tail "
                   "past the last full block is divided by eps), statistics over the whole batch instead of the group, or "
                   "another convention (the std's n - 1, eps, a group of one's 0)")
        elif set(wrong) <= SPLIT:
            how = ("only where the batch is split over micro-batches or ranks: each group's statistics taken over the part of "
                   "it in one micro-batch or on one rank, not gathered over the global batch")
        else:
            how = ("only where a group's samples are not adjacent: each group taken as a run of adjacent samples (the right "
                   "sizes, the wrong members)")
        return (f"the advantages the engine used are not each sample's reward normalised within its group (the samples with "
                f"its group id, wherever they sit; harness/contract/advantage.py), {how}; arms: {', '.join(wrong)}")
    against_harness = sorted({c.arms.arm.name for c in failed if not c.arms.against_arm})
    if against_harness:
        return (f"the loss or the token weights of {', '.join(against_harness)} differ from the definition at the harness's group "
                "advantages: the advantages the engine used are not each sample's reward normalised within its group (found "
                "by position, a partial group or a group of one borrowing another's rewards, a per-batch baseline); report "
                "StepResult.advantages (reports={'advantages'}) to see which sample")
    return ("every arm's advantages are right but the loss or the gradients depend on the order of the samples or their split "
            "over micro-batches and ranks: the aggregation's normaliser is not global (see rl_loss_aggregation)")


RL_GROUP_ADVANTAGES = Scenario(
    name="rl_group_advantages",
    invariant="an engine's own GRPO advantages depend only on group membership: in group order, shuffled, interleaved, split "
              "over micro-batches and ranks, with a partial group and a group of one, every sample's advantage is its reward "
              "normalised within its group (0, never NaN, for a group of one), and the loss, log-probs and every gradient "
              "are the same",
    catches=("rl-groups-by-stride",),
    stages=(from_setting(build), Stage(build=policy_arms)),
    judge=judge,
    diagnose=diagnose,
    applies=applies,
    optional_arms=frozenset({"shuffled_micro_batches", "dp2", "dr_grpo"}),
    disk_arms=6,
)
