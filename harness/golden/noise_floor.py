"""The noise floor: how far the reference trainer's own float32 / bfloat16 run of the golden case
lies from its float64 golden, per quantity.

`packcheck golden regen` measures it (on every CPU kernel path of the machine, keeping the worst)
and stores it beside the golden; golden_regression in a lower precision then allows NOISE_FACTOR
times it (the flash-attention test style: an engine may be a few times noisier than the reference
in the same precision, never orders of magnitude). The floor is measured with golden_regression's
own comparisons, so a tolerance and the error it bounds are always the same metric.
"""

from __future__ import annotations

from packcheck.harness.compare import GOLDEN, Arms, Tolerance, compare_results
from packcheck.harness.compare.tolerances import NOISE_QUANTITIES
from packcheck.harness.contract import OptimizerSpec, StepResult

UNBOUNDED = Tolerance(**{name: 0.0 for name in NOISE_QUANTITIES})


def measure_floor(low: StepResult, golden: StepResult, optimizer: OptimizerSpec | None) -> dict[str, float]:
    """The worst observed error per quantity of `low` against `golden`, over every comparison."""
    rows = compare_results(Arms("noise floor", GOLDEN), low, golden, UNBOUNDED, lambda sample, token: "", optimizer=optimizer)
    return {name: max((r.observed for r in rows if r.quantity == name), default=0.0) for name in NOISE_QUANTITIES}


def worst_floor(floors: list[dict[str, float]]) -> dict[str, float]:
    """Per quantity, the largest of several measured floors (one per kernel path)."""
    return {name: max(floor[name] for floor in floors) for name in NOISE_QUANTITIES}
