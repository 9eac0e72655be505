"""The one tolerance of an arm judged against float64 truth (the stored golden, the oracle's float64 arm).

float64 arms are judged by the table (a logic check). A lower-precision arm is judged against float64
truth, not against another arm of its own precision: NOISE_FACTOR x the reference trainer's own error at
that precision against its float64 golden (its noise floor, measured on the golden case when the goldens
are written). Where the family has no such floor, `GoldenProblem` says why; what that means is the
caller's to decide (golden_regression cannot judge at all; the oracle falls back to the table).
"""

from __future__ import annotations

from packcheck.harness.compare import Tolerance, tolerance_from_floor
from packcheck.harness.golden import load_noise_floor


def truth_tolerance(family: str, dtype: str, table: Tolerance) -> Tolerance:
    """`table` in float64, else NOISE_FACTOR x the family's stored noise floor at `dtype` (raises GoldenProblem)."""
    if dtype == "float64":
        return table
    return tolerance_from_floor(load_noise_floor(family, dtype), dtype)
