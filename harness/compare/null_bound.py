"""A gradient's allowed error from a null measured in the run: the engine's own rounding of the arm compared against
(issue 41; docs/margins.md, "Gradients: a null measured in the run").

No term derived from the values the judge holds bounds a bf16 gradient at real size: a small tensor that sums over every
token (a q-norm weight) cancels inside the engine, and 28 layers amplify the rounding that a layout changes. What does
bound it is the engine's own rounding of that very case, measured: the base arm run again in a dtype that rounds less
(bfloat16 -> float32, float32 -> float64), by the same engine. Every bug in BUGS.md is logic, the same in every dtype, so
the difference between the two holds the engine's rounding and none of a bug.

    allowed(tensor, metric) = max(table, min(NULL_FACTOR x null(tensor, metric), NULL_CEILING x table))

NULL_FACTOR is the table's own CALIBRATION_FACTOR over its floors: the table is 4x the worst null measured offline, this
is 4x the null of the tensor compared, measured now (measured at qwen3 0.6b on an H100: a clean arm's error reached 1.59x
its base arm's null, a policy-loss bug's least-moved tensor 12.2x). NULL_CEILING bounds what a null can buy: an engine
whose run in the other dtype is noisy or wrong raises its own thresholds at most that far above the table. float64 is
never given a null: its table is the logic check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from packcheck.harness.compare.bound import Source
from packcheck.harness.compare.rounding_bound import Derived, at_least

NULL_FACTOR = 4.0  # the table's CALIBRATION_FACTOR (harness/compare/tolerances.py), over a null measured now
# the most a null may raise a threshold above the table: what an engine whose run in the dtype up is noisy or wrong can
# buy; every public mutant's bf16 signal at 0.6b is 17x the table or more (docs/gpu.md)
NULL_CEILING = 4.0
METRICS = ("rel_l2", "max_rel")  # a gradient row's metrics, in the order compare_tensors writes them
HIGHER = {"bfloat16": "float32", "float32": "float64"}  # the dtype a run's null is measured in
SHORT = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16"}


@dataclass(frozen=True, slots=True)
class GradientNull:
    """One engine arm's gradients in the run's dtype against the same case in HIGHER's: per tensor, per metric."""

    arm: str  # the engine arm it is the null of (what other arms are compared against)
    dtype: str  # the run's
    errors: Mapping[str, Mapping[str, float]]  # tensor -> metric -> error

    def allowed(self, tensor: str, metric: str, table: dict) -> dict:
        """Tolerance.by's {threshold, bound} for one gradient row against this arm: raised to NULL_FACTOR x the null
        where that is larger, never above NULL_CEILING x the table."""
        null = self.errors.get(tensor, {}).get(metric)
        if null is None:
            return table
        ceiling = NULL_CEILING * table["threshold"]
        raised = min(NULL_FACTOR * null, ceiling)
        capped = f", capped at {NULL_CEILING:g} x the table" if NULL_FACTOR * null > ceiling else ""
        term = (f"{NULL_FACTOR:g} x this engine's own {SHORT[self.dtype]} rounding of {self.arm!r} ({metric} {null:.3g} against "
                f"its {SHORT[HIGHER[self.dtype]]} run){capped}")
        return at_least(table, Derived(raised, term, Source.NULL, null))

