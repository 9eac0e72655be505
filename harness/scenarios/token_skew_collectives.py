"""token_skew_collectives: with token-budget micro-batching (the engine cuts each data-parallel rank's samples into
micro-batches of at most a budget's packed tokens: harness/contract/token_budget.py) on dp=2 FSDP2, where rank 1 holds
ten times rank 0's tokens, every rank issues the same collective sequence, and the loss, count, log-probs and every
gradient equal the single-process run's.

Rank 0's two samples (13 tokens) fit in one micro-batch of the 48-token budget; rank 1's seven (130 tokens) need three.
No rank may decide its number of micro-steps alone: every rank runs the most any rank's cut needs, the lighter rank
empty micro-batches that contribute nothing yet issue every collective of a micro-step. Under FSDP2 a micro-step's
forward all-gathers the parameters, so a rank that leaves its loop after its own one micro-batch leaves its peer
waiting in the next micro-batch's all-gather while it waits in the step's next collective (verl #6176 and #6178):
a hang verdict with every rank's state, or, where the mismatched collectives pair up by accident, a failed symmetry
comparison naming the first divergent collective. Rank 0 holds fewer samples than rank 1 needs micro-batches, so it
cannot match the count by cutting its own samples finer: it needs truly empty micro-batches (EasyR1 #11004, slime
PR #1860), and one that adds to the loss, the count or a gradient fails the comparison with the single process.

One FSDP2 arm, no DDP arm: DDP has no collective per micro-step where it reduces once, in the last backward (the
reference's does), and the FSDP2 arm already compares the numbers an empty micro-batch could spoil.
"""

from __future__ import annotations

from packcheck.harness.contract import ParallelPlan, Partition, TokenBudget, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing, symmetry

SEQ_LEN = 48
BUDGET = TokenBudget(max_tokens=SEQ_LEN)  # each micro-batch one packed row
SINGLE, SKEWED = "single", "dp2_shard_budget"
# SKEWED_LENGTHS: rank 0 holds a fully masked length-1 sample and a 12-token one (13 tokens, one micro-batch); rank 1
# the rest (130 tokens, cut in order 40+2+3 | 31+6 | 44+4: three micro-batches)
PARTITION = Partition(per_rank=(((4, 5),), ((0, 1, 2, 3, 6, 7, 8),)))


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    return {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN)),
            SKEWED: arm(setting, SKEWED, samples, packed(SEQ_LEN), PARTITION, parallel=ParallelPlan(dp=2, dp_style="shard"),
                        token_budget=BUDGET)}


def judge(j: Judgement) -> list:
    return every_arm_against(j, SINGLE) + [symmetry(SKEWED, j.results[SKEWED].collectives)]


DEADLOCK = ("the ranks ran different numbers of micro-steps under the token budget: each its own cut's, not the most any "
            "rank's cut needs (an all-reduce MAX over the data-parallel group, then empty micro-batches on the lighter "
            "rank), so the rank that finished first waits in the step's next collective while its peer waits in a "
            "micro-step's all-gather")


def diagnose(j: Judgement, failed: list) -> str:
    diverged = failing(failed, "collectives")
    if diverged:
        return (f"the ranks issued different collective sequences on {SKEWED}: they ran different numbers of micro-steps (the "
                "count not equalised over the data-parallel group), or an empty micro-batch skipped a collective a micro-step "
                f"issues:\n  {diverged[0].where}")
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if failing(failed, "logprobs"):
        return ("log-probs differ from the single-process run: the token-budget cut split or dropped a sample, or the forward "
                "depends on the rank's micro-batches")
    return ("loss or gradients differ from the single-process run: an empty micro-batch contributes (its dummy row in the loss "
            "or its gradient), or the reduction over the data-parallel group is wrong")


TOKEN_SKEW_COLLECTIVES = Scenario(
    name="token_skew_collectives",
    invariant=("token-budget micro-batching on dp=2 FSDP2 with ten times the tokens on one rank: identical per-rank collective "
               "sequences (the micro-step count equalised, empty micro-batches on the lighter rank), and the single-process "
               "loss, count, log-probs and every gradient"),
    catches=("microbatch-count-not-equalised",),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    deadlock=DEADLOCK,
    disk_arms=2,
)
