"""The bound that judged a comparison: which tolerance field, where that field's value comes from, and
the noise floor it is a multiple of. A comparison carries it (Comparison.bound), so calibration and
floor ratios read it instead of guessing it back from the threshold's value.

Sources:
- TABLE: float64's table entry, the spread measured across CPU kernel paths (harness/compare/tolerances.py);
- CALIBRATED: CALIBRATION_FACTOR x the reference's noise floor of the dtype (the shipped floors, or the run's
  own from --noise-floors): the comparisons `packcheck calibrate` measures;
- GOLDEN_FLOOR: NOISE_FACTOR x the reference's own error against its float64 golden at the dtype (the
  bound of a lower-precision arm judged against float64 truth);
- ROUNDING: the error the dtype's rounding allows at the values compared, propagated through the quantity's
  definition (harness/compare/rounding_bound.py), where it exceeds the table's threshold; `term` says it in words
  ("bf16 spacing at |logp| = 11.9: 6.45% of the weight") and `table` keeps the threshold the table alone gave;
- NULL: NULL_FACTOR x the engine's own rounding of the arm compared against, measured in the run (that arm again in a
  dtype that rounds less: harness/compare/null_bound.py), where it exceeds the table's threshold; `term` and `table`
  as for ROUNDING, `floor` the measured null;
- RULE: an exact rule (a count, a token set, a frozen parameter: threshold 0) or a bound a scenario sets
  itself, next to its entry with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Source(str, Enum):
    TABLE = "table"
    CALIBRATED = "calibrated_floor"
    GOLDEN_FLOOR = "golden_floor"
    ROUNDING = "rounding"
    NULL = "null"
    RULE = "rule"


@dataclass(frozen=True, slots=True)
class Bound:
    field: str  # the Tolerance field that set the threshold ("" for a rule)
    source: Source
    floor: float | None = None  # the noise floor the threshold is a multiple of (CALIBRATED, GOLDEN_FLOOR, NULL)
    term: str = ""  # ROUNDING, NULL: the derived term in words
    table: float | None = None  # ROUNDING, NULL: the threshold the table alone gave (the derived term is larger)

    def to_json(self) -> dict:
        # term and table only where set: rows the table judged are written as before
        return ({"field": self.field, "source": self.source.value, "floor": self.floor}
                | ({"term": self.term} if self.term else {}) | ({"table": self.table} if self.table is not None else {}))

    def describe(self) -> str:
        """The derived term that set the threshold, as the failing line and the report say it; "" where the table did."""
        if not self.term:
            return ""
        return f"by {self.term}" + ("" if self.table is None else f"; the table alone: {self.table:.3g}")

    @staticmethod
    def from_json(data: dict) -> Bound:
        return Bound(str(data["field"]), Source(data["source"]), data["floor"], str(data.get("term", "")), data.get("table"))


RULE = Bound(field="", source=Source.RULE)
