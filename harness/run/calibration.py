"""The noise floor of lower-precision runs, measured from a clean engine's results over many seeds.

A run of the reference in float32 or bfloat16 compares arms that differ only by rounding: packed
against unpacked, one micro-batch against several, the engine's loss against the harness's
closed form. Every such comparison of a clean engine is a null measurement: its observed error is
rounding noise. Over many seeds their maximum per tolerance field is the dtype's noise floor, and
the tolerance a verdict applies is a factor above it (harness/compare/tolerances.py).

What is measured, from results.json rows, each of which carries the bound that judged it
(harness/compare/bound.py) and its arms' roles and passes (harness/compare/arm_id.py):
- `floors`: per tolerance field, the comparisons the dtype's calibrated table judged (bound source
  `calibrated_floor`): arm against arm, or against the harness's definition, on the run's device.
  Arms relocated to the CPU in float64 (`arm_pass`/`against_pass` cpu_float64) measure nothing about
  the dtype; comparisons judged by a rule or a scenario's own bound (goldens, the float64 oracle) are
  left out too.
- `against_float64`: the gradient oracle's comparisons (an arm against the same arm in float64): the
  engine's own error against the exact answer, which golden_regression's noise factor bounds.
- `arm_pairs`: the floor of each scenario's arm pair, `family_floors` each family's: which sets a floor.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from packcheck.harness.compare import Pass, Role
from packcheck.harness.compare.bound import Source
from packcheck.harness.compare.tolerances import NOISE_FLOORS, NOISE_QUANTITIES
from packcheck.harness.errors import InputError


@dataclass(frozen=True, slots=True)
class Sample:
    """One null measurement: a clean engine's observed error and where it came from."""

    field: str
    observed: float
    seed: int
    row: Mapping  # the results row (family, scenario, arms, quantity, item, metric, where)

    def origin(self) -> str:
        r = self.row
        item = f" {r['item']}" if r.get("item") else ""
        return f"seed {self.seed} {r['family']} {r['scenario']} {r['arms']} {r['quantity']}{item} {r['metric']}"


@dataclass(frozen=True, slots=True)
class Floor:
    """The distribution of one field's null measurements."""

    field: str
    count: int
    median: float
    p99: float
    worst: Sample

    @property
    def floor(self) -> float:
        return self.worst.observed

    @property
    def tolerance(self) -> float:
        """The threshold the worst comparison was judged by: the bound its row carries, of the run that measured it."""
        return number(self.worst.row["threshold"])

    def to_json(self) -> dict:
        return {"field": self.field, "count": self.count, "median": self.median, "p99": self.p99, "max": self.floor,
                "worst": self.worst.origin()}


class FloorsProblem(InputError):
    """A --noise-floors file packcheck cannot use: the message names the file, the entry and the fix."""


def floors_from_report(path: str | Path) -> dict[str, dict[str, float]]:
    """dtype -> field -> floor from a `packcheck calibrate` calibration.json (each field's "max"), for `--noise-floors`:
    a run judged by the floors measured on the user's own model and machine. Only float32/bfloat16 fields it gives
    a positive floor change; the rest keep the shipped floors."""
    fix = "give the calibration.json that `packcheck calibrate --out DIR` writes"
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FloorsProblem(f"--noise-floors {path}: cannot read it as JSON ({err}); {fix}") from None
    dtypes = report.get("dtypes") if isinstance(report, dict) else None
    if not isinstance(dtypes, dict):
        raise FloorsProblem(f"--noise-floors {path}: no 'dtypes' object; {fix}")
    floors: dict[str, dict[str, float]] = {}
    for dtype, group in dtypes.items():
        if dtype not in NOISE_FLOORS:
            continue  # float64's table is not a multiple of a floor
        for name, entry in (group.get("fields") or {}).items() if isinstance(group, dict) else ():
            value = entry.get("max") if isinstance(entry, dict) else None
            if name not in NOISE_FLOORS[dtype] or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise FloorsProblem(f"--noise-floors {path}: dtypes.{dtype}.fields.{name}.max is {value!r}; a floor is a "
                                    f"finite error >= 0 of one of {', '.join(NOISE_FLOORS[dtype])}; {fix}")
            if value > 0:  # a field measured bit-exact keeps the shipped floor: a tolerance of 0 would reject any other engine
                floors.setdefault(dtype, {})[name] = float(value)
    if not floors:
        raise FloorsProblem(f"--noise-floors {path}: no float32 or bfloat16 field to use; {fix} for a float32 or bfloat16 run")
    return floors


def observed(row: Mapping) -> float:
    return number(row["observed"])


def number(value: float | str) -> float:
    return float(value) if isinstance(value, str) else value  # results.json writes inf/nan as strings


class OldResults(InputError):
    """Results written before rows carried their bound: nothing in them says which comparisons the table judged."""


def samples(rows: Iterable[Mapping], seed: int) -> tuple[list[Sample], list[Sample]]:
    """The run's null measurements: the rows judged by a noise field (NOISE_QUANTITIES) of the dtype's calibrated table,
    and those against the float64 oracle."""
    judged, oracle = [], []
    for row in rows:
        if "bound" not in row:
            raise OldResults("these results predate the bound each comparison records (rows without 'bound'): "
                             "run them again with this packcheck (packcheck calibrate --engine ... --seeds ...)")
        field = row["bound"]["field"]
        if field not in NOISE_QUANTITIES or Pass.CPU_LOGIC.value in (row["arm_pass"], row["against_pass"]):
            continue
        sample = Sample(field=field, observed=observed(row), seed=seed, row=row)
        if row.get("against_role") == Role.ORACLE.value:
            oracle.append(sample)
        elif row["bound"]["source"] == Source.CALIBRATED.value:
            judged.append(sample)
    return judged, oracle


def floors(measured: Iterable[Sample]) -> dict[str, Floor]:
    by_field: dict[str, list[Sample]] = defaultdict(list)
    for sample in measured:
        by_field[sample.field].append(sample)
    return {field: _floor(field, group) for field, group in sorted(by_field.items())}


def arm_pair_floors(measured: Iterable[Sample]) -> dict[str, dict[str, float]]:
    """scenario / arms -> field -> the largest observed error over every seed and family."""
    worst: dict[str, dict[str, float]] = defaultdict(dict)
    for s in measured:
        key = f"{s.row['scenario']} / {s.row['arms']}"
        worst[key][s.field] = max(worst[key].get(s.field, 0.0), s.observed)
    return dict(sorted(worst.items()))


def family_floors(measured: Iterable[Sample]) -> dict[str, dict[str, float]]:
    """field -> family -> the largest observed error: which family sets a dtype's floor, and by how much."""
    worst: dict[str, dict[str, float]] = defaultdict(dict)
    for s in measured:
        family = s.row["family"]
        worst[s.field][family] = max(worst[s.field].get(family, 0.0), s.observed)
    return {field: dict(sorted(by_family.items())) for field, by_family in sorted(worst.items())}


def _floor(field: str, group: list[Sample]) -> Floor:
    values = sorted(s.observed for s in group)
    p99 = values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)]
    return Floor(field=field, count=len(values), median=statistics.median(values), p99=p99,
                 worst=max(group, key=lambda s: s.observed))
