"""The noise floor of lower-precision runs, measured from a clean engine's results over many seeds.

A run of the reference in float32 or bfloat16 compares arms that differ only by rounding: packed
against unpacked, one micro-batch against several, the engine's loss against the harness's
closed form. Every such comparison of a clean engine is a null measurement: its observed error is
rounding noise. Over many seeds their maximum per tolerance field is the dtype's noise floor, and
the tolerance a verdict applies is a factor above it (harness/compare/tolerances.py).

What is measured, from results.json rows:
- `floors`: per tolerance field, the comparisons the dtype's table judges (a threshold equal to the
  entry of the table the run recorded in its provenance): arm against arm, or against the
  harness's definition, on the run's device.
  Arms relocated to the CPU in float64 (the rows' `arm_pass`/`against_pass`) measure nothing about the dtype and are
  left out; so are comparisons a scenario judges with its own bound (goldens, the float64 oracle).
- `against_float64`: the gradient oracle's comparisons (an arm against the same arm in float64): the
  engine's own error against the exact answer, which golden_regression's noise factor bounds.
- `arm_pairs`: the floor of each scenario's arm pair, `family_floors` each family's: which sets a floor.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from packcheck.harness.compare import Pass, Role, Tolerance, tolerance_for
from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR, NOISE_FLOORS
from packcheck.harness.errors import InputError

# the Tolerance field a quantity is judged by (compare/arms.py, the policy and router comparisons)
FIELD_OF = {"logprobs": "logprobs", "ratio": "logprobs", "loss": "loss", "aux_loss": "loss", "entropy_term": "loss",
            "grad": "grad", "dloss_dlogprobs": "dloss_dlogprobs", "params_after": "params_after"}


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

    def to_json(self) -> dict:
        return {"field": self.field, "count": self.count, "median": self.median, "p99": self.p99, "max": self.floor,
                "worst": self.worst.origin()}


def floor_ratio(floors: Mapping[str, float], quantity: str, observed_error: float, threshold: float) -> float | None:
    """A comparison's error as a multiple of its dtype's calibrated noise floor (`floors`: a verdict's), where the table
    judged it: its threshold is CALIBRATION_FACTOR x the floor (None in float64, for exact quantities, and where a
    scenario set its own bound)."""
    floor = floors.get(FIELD_OF.get(quantity, ""))
    if not floor or threshold != CALIBRATION_FACTOR * floor:
        return None
    return observed_error / floor


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
    value = row["observed"]
    return float(value) if isinstance(value, str) else value  # results.json writes inf/nan as strings


def samples(rows: Iterable[Mapping], seed: int, table: Tolerance) -> tuple[list[Sample], list[Sample]]:
    """The run's null measurements judged by `table` (the run's dtype's entry), and those against the float64 oracle."""
    judged, oracle = [], []
    for row in rows:
        field = FIELD_OF.get(row["quantity"])
        # rows of results written before arms were typed have no arm_pass/against_role: read as the engine's, in the main pass
        if field is None or Pass.CPU_LOGIC.value in (row.get("arm_pass"), row.get("against_pass")):
            continue
        sample = Sample(field=field, observed=observed(row), seed=seed, row=row)
        if row.get("against_role") == Role.ORACLE.value:
            oracle.append(sample)
        elif judged_by_table(row, table, field):
            judged.append(sample)
    return judged, oracle


def judging_table(provenance: Mapping, dtype: str) -> Tolerance:
    """The table a run judged `dtype` with: recorded in its provenance (today's, for results written before that)."""
    recorded = (provenance.get("tolerances") or {}).get(dtype)
    return tolerance_for(dtype) if recorded is None else dataclasses.replace(tolerance_for(dtype), **recorded)


def judged_by_table(row: Mapping, table: Tolerance, field: str) -> bool:
    """Whether the dtype's table judged the row (not a scenario's own bound): its threshold is the table's entry."""
    return row["threshold"] == getattr(table, field)


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
