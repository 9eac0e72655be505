"""The one tolerance of an arm judged against float64 truth (the stored golden, the oracle's float64 arm).

float64 arms are judged by the table (a logic check). A lower-precision arm is judged against float64
truth, not against another arm of its own precision: NOISE_FACTOR x the reference trainer's own error at
that precision against its float64 golden (its noise floor, measured on the golden case when the goldens
are written). Where the family has no such floor, `GoldenProblem` says why; what that means is the
caller's to decide (golden_regression cannot judge at all; the oracle falls back to the table).

A scenario says on its entry which tolerance its judge compares with (`Scenario.bounds`): the table, or
TRUTH (its arms are judged against the float64 oracle's: truth_tolerance, the table where the family has
no noise floor). The runner hands it to the judge in the Judgement (`Judgement.bound`).
"""

from __future__ import annotations

from enum import StrEnum

from packcheck.harness.compare import Tolerance, tolerance_from_floor
from packcheck.harness.golden import GoldenProblem, load_noise_floor


def truth_tolerance(family: str, dtype: str, table: Tolerance) -> Tolerance:
    """`table` in float64, else NOISE_FACTOR x the family's stored noise floor at `dtype` (raises GoldenProblem)."""
    if dtype == "float64":
        return table
    return tolerance_from_floor(load_noise_floor(family, dtype), dtype)


class Bounds(StrEnum):
    TABLE = "table"  # the dtype's row of the table: arms against each other, or against the harness's own definition
    TRUTH = "truth"  # arms against the float64 oracle's: truth_tolerance, the table where the family has no noise floor

    def of(self, family: str, dtype: str, table: Tolerance) -> Tolerance:
        """The tolerance a judge of these bounds compares with, in a run judged by `table`."""
        if self is Bounds.TABLE:
            return table
        try:
            return truth_tolerance(family, dtype, table)
        except GoldenProblem:
            return table
