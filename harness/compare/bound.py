"""The bound that judged a comparison: which tolerance field, where that field's value comes from, and
the noise floor it is a multiple of. A comparison carries it (Comparison.bound), so calibration and
floor ratios read it instead of guessing it back from the threshold's value.

Sources:
- TABLE: float64's table entry, the spread measured across CPU kernel paths (harness/compare/tolerances.py);
- CALIBRATED: CALIBRATION_FACTOR x the reference's noise floor of the dtype (the shipped floors, or the run's
  own from --noise-floors): the comparisons `packcheck calibrate` measures;
- GOLDEN_FLOOR: NOISE_FACTOR x the reference's own error against its float64 golden at the dtype (the
  bound of a lower-precision arm judged against float64 truth);
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
    RULE = "rule"


@dataclass(frozen=True, slots=True)
class Bound:
    field: str  # the Tolerance field that set the threshold ("" for a rule)
    source: Source
    floor: float | None = None  # the noise floor the threshold is a multiple of (CALIBRATED, GOLDEN_FLOOR)

    def to_json(self) -> dict:
        return {"field": self.field, "source": self.source.value, "floor": self.floor}


RULE = Bound(field="", source=Source.RULE)
