"""vlm_collective_symmetry: on dp=2 with one rank holding only text-only micro-batches and the
other images (3 in one micro-batch, 1 in the next), every rank issues the same collective
sequence on every process group, and the loss, count, log-probs and every gradient equal the
single-process run's; packed (one forward per micro-batch) and stacked (a different number of
forwards per micro-batch on each rank).

A vision tower whose parameters take part in collectives on every forward (FSDP) must run on
every rank for every micro-batch, on a dummy image when the micro-batch has none; a rank that
skips it leaves its peers waiting in the tower's all-gather (prime-rl, LLaMA-Factory). That ends
as a hang verdict with every rank's state and where the sequences diverge, or, when the run
completes with the mismatched collectives paired up by accident, as a failed symmetry
comparison naming the first divergent collective. On a text-only family the same arms check the
symmetry of a plain dp=2 step with uneven micro-batches.
"""

from __future__ import annotations

from packcheck.harness.contract import Layout, LayoutKind, ParallelPlan, Partition, packed
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing, symmetry

SEQ_LEN = 48
SINGLE = "single"
# images by the data generator (sample i holds i % 3): 0, 3, 6 are text-only; 1, 4, 7 hold one, 2, 5 two
LENGTHS = ((20, "all"), (14, "response"), (25, "all"), (9, "turns"), (12, "all"), (30, "response"), (6, "all"), (16, "all"))
TEXT_ONLY_RANK = ((0, 3), (6,))
IMAGE_RANK = ((1, 2), (4, 5, 7))
PARTITION = Partition(per_rank=(IMAGE_RANK, TEXT_ONLY_RANK))
LAYOUTS = {"dp2_packed": packed(SEQ_LEN), "dp2_stacked": Layout(kind=LayoutKind.STACKED, bucket_width=8)}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, LENGTHS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN))}
    for name, layout in LAYOUTS.items():
        arms[name] = arm(setting, name, samples, layout, PARTITION, parallel=ParallelPlan(dp=2))
    return arms


def judge(j: Judgement) -> list:
    rows = every_arm_against(j, SINGLE)
    return rows + [symmetry(name, j.results[name].collectives) for name in LAYOUTS if name in j.results]


def diagnose(j: Judgement, failed: list) -> str:
    diverged = failing(failed, "collectives")
    if diverged:
        return (f"the ranks issued different collective sequences on {diverged[0].arms.arm}: a rank skipped a collective the others "
                f"issued (the vision tower on a text-only micro-batch?):\n  {diverged[0].where}")
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    if not j.cases[SINGLE].has_images:
        return "log-probs, loss or gradients differ from the single-process run: the forward or the reduction depends on the rank's micro-batches"
    if failing(failed, "logprobs"):
        return "log-probs differ from the single-process run: the image features or MRoPE positions depend on the rank's micro-batches"
    return "loss or gradients differ from the single-process run: the dummy image of a text-only micro-batch contributes, or the reduction is wrong"


VLM_COLLECTIVE_SYMMETRY = Scenario(
    name="vlm_collective_symmetry",
    invariant="dp=2 with a text-only rank and an image rank: identical per-rank collective sequences, and the single-process loss, "
              "count, log-probs and every gradient",
    catches=("vision-skip-hang",),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(LAYOUTS),
    deadlock=("a rank skipped the vision tower on a text-only micro-batch: its peers wait in the tower's all-gather while it "
              "waits in the step's next collective"),
    disk_arms=3,
)
