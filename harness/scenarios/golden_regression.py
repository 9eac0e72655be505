"""golden_regression: the engine reproduces the reference trainer's stored float64 results.

One case per family (packed rows, an uneven two-micro-batch partition, an AdamW step) compared on
every quantity, including the parameters after the step. For the reference itself this pins its
numbers across versions; for any other engine it is a cross-engine check against the oracle that
needs no reference run.
"""

from __future__ import annotations

from packcheck.harness.compare import GOLDEN, Arms, Comparison, compare_results, tolerance_from_floor
from packcheck.harness.contract import OptimizerSpec, Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.golden import GoldenProblem, load_golden, load_noise_floor, obtained_path
from packcheck.harness.scenarios.base import Judgement, Scenario, Setting
from packcheck.harness.scenarios.building import arm, samples_for

SEQ_LEN = 48
ARM = "golden_case"


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MIXED_DOCUMENTS)
    partition = Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8, 9)])
    return {ARM: arm(setting, ARM, samples, packed(SEQ_LEN), partition, optimizer=OptimizerSpec())}


def judge(j: Judgement) -> list:
    case, result = j.cases[ARM], j.results[ARM]
    family = j.setting.family
    try:
        golden = load_golden(family, case)
        tolerance = j.tolerance if case.dtype == "float64" else tolerance_from_floor(load_noise_floor(family, case.dtype), case.dtype)
    except GoldenProblem as problem:
        return [Comparison(arms=Arms(ARM, GOLDEN), quantity="golden", item=family, metric="available", observed=1.0, threshold=0.0,
                           where=f"{problem} (the obtained result goes to {obtained_path(family)})")]
    return compare_results(Arms(ARM, GOLDEN), result, golden, tolerance, j.locate(ARM), optimizer=case.optimizer)


def diagnose(j: Judgement, failed: list) -> str:
    if any(c.quantity == "golden" for c in failed):
        return failed[0].where
    return (
        f"the engine's numbers differ from the stored float64 golden of the reference trainer; the obtained result "
        f"goes beside the golden ({obtained_path(j.setting.family)}) for a diff"
    )


GOLDEN_REGRESSION = Scenario(
    name="golden_regression",
    invariant="log-probs, loss, count, every gradient and the post-AdamW parameters equal the reference's stored float64 goldens",
    catches=("cross-doc-attention", "const-microbatch-scale", "ga-mean-of-means", "moe-router-counts-local"),
    build=build,
    judge=judge,
    diagnose=diagnose,
    golden_arm=ARM,
)
