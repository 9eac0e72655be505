"""microbatch_invariance: the gradient of the global token-mean loss does not depend on how the
batch is cut into micro-batches.

Lengths are skewed so the token counts of micro-batches (and of data-parallel ranks, in the
dp2 arm) differ by an order of magnitude: a
per-micro-batch mean, or a constant per-micro-batch scale, is exact only for equal counts and
shows up here. The conformance suite adds hypothesis-generated partitions through
`arms_for_partition`.
"""

from __future__ import annotations

from packcheck.harness.compare import Arms, compare_results
from packcheck.harness.contract import UNPACKED, ParallelPlan, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for, seeded_partition
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.router_diagnosis import router_diagnosis
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing

SEQ_LEN = 48
N = len(SKEWED_LENGTHS)
PARTITIONS = {
    "uneven": Partition.single_rank([(0, 7), (1, 2, 4), (3, 5, 6, 8)]),
    "singletons": Partition.single_rank([(i,) for i in range(N)]),
    "shuffled": Partition.single_rank([(5, 1), (8, 0, 3), (2,), (7, 4, 6)]),
}
REFERENCE_ARM = "one"
BASELINES = (REFERENCE_ARM, "one_unpacked")  # one micro-batch, packed and unpacked: the unpacked arm is judged against the latter
BASELINE_OF = {"uneven_unpacked": "one_unpacked"}
# Two data-parallel ranks with uneven token counts per rank and per micro-step.
DP_ARM, DP_PARTITION = "dp2_uneven", Partition(per_rank=(((0, 7), (1, 2, 4)), ((3, 5), (6, 8))))


def arms_for_partition(setting: Setting, partition: Partition, layout=None) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    layout = layout or packed(SEQ_LEN)
    return {
        REFERENCE_ARM: arm(setting, REFERENCE_ARM, samples, layout),
        partition.describe(): arm(setting, partition.describe(), samples, layout, partition),
    }


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {REFERENCE_ARM: arm(setting, REFERENCE_ARM, samples, packed(SEQ_LEN))}
    partitions = PARTITIONS | {"shuffled": seeded_partition(setting, PARTITIONS["shuffled"])}  # another at each --seed
    arms |= {name: arm(setting, name, samples, packed(SEQ_LEN), partition) for name, partition in partitions.items()}
    arms["one_unpacked"] = arm(setting, "one_unpacked", samples, UNPACKED)
    arms["uneven_unpacked"] = arm(setting, "uneven_unpacked", samples, UNPACKED, PARTITIONS["uneven"])
    arms[DP_ARM] = arm(setting, DP_ARM, samples, packed(SEQ_LEN), DP_PARTITION, parallel=ParallelPlan(dp=2))
    return arms


def judge(j: Judgement) -> list:
    rows = []
    for name in j.results:
        if name not in BASELINES:
            reference = BASELINE_OF.get(name, REFERENCE_ARM)
            rows += compare_results(Arms(name, reference), j.results[name], j.results[reference], j.tolerance, j.locate(name))
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    if shared := shared_diagnosis(j, failed, baseline=REFERENCE_ARM):
        return shared
    if moe := router_diagnosis(failed):
        return moe
    if failing(failed, "logprobs"):
        return "per-token log-probs depend on the micro-batch partition: the forward itself sees the partition"
    if failing(failed, "grad") or failing(failed, "dloss_dlogprobs"):
        return (
            "gradients depend on how the batch is cut into micro-batches although log-probs do not: each micro-batch "
            "is normalised by its own token count or by a constant (mean of means, constant loss scale) instead of "
            "its share of the global token count"
        )
    return "the reported loss or token count depends on the partition: it is averaged per micro-batch instead of over the global batch"


MICROBATCH_INVARIANCE = Scenario(
    name="microbatch_invariance",
    invariant="loss, count, per-token loss weights and every gradient are independent of the (uneven) partition into micro-batches",
    catches=("const-microbatch-scale", "ga-mean-of-means", "moe-router-counts-local", "loss-reported-wrong", "empty-microbatch-nan",
             "moe-aux-grad-accumulation-scaled"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    # the packed arms against `one`, the unpacked ones against `one_unpacked`: an engine that never packs (or
    # never pads) is judged on the layout it runs
    optional_arms=frozenset({REFERENCE_ARM, *PARTITIONS, "one_unpacked", "uneven_unpacked", DP_ARM}),
    disk_arms=7,
)
