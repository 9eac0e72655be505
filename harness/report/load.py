"""A run directory's results.json as pandas tables: one row per verdict, one row per comparison.

The public API for results as data (docs/report.md, "Results as data"):

    from packcheck.harness.report import load_run
    run = load_run("reports/latest")
    run.verdicts      # DataFrame, one row per verdict: engine, family, scenario, ..., status, max_margin, reproduce
    run.comparisons   # DataFrame, one row per comparison: arm, against, quantity, item, metric, observed, threshold, margin, passed
    run.provenance    # dict: versions, device, git commit, command, time

Reports read runs only through `load_run`, so the schema (`packcheck.results/1`, written and read by
harness/run_dir/results.py) is decoded in one place: "inf"/"nan" strings become floats again, and
each verdict gets `key` (its VERDICT_KEYS values: engine, family, scenario, dtype, device, ...)
and `anchor` (its HTML id). A key field an older file lacks reads as "".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from packcheck.harness.compare.bands import short_number
from packcheck.harness.compare.bound import Bound
from packcheck.harness.judging.status import Status
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.results import VERDICT_KEYS, load_results

STATUSES = (Status.PASS, Status.FAIL, Status.UNSUPPORTED, Status.ERROR)  # counted first, zeros included, in this order
VERDICT_COLUMNS = (*VERDICT_KEYS, "status", "known_finding", "diagnosis", "detail", "seconds", "max_margin", "worst",
                   "comparisons", "failing", "reproduce", "message")
ROW_COLUMNS = (*VERDICT_KEYS, "arms", "arm", "against", "quantity", "item", "metric", "observed", "threshold", "where", "passed", "margin",
               "allowed_by")
# Only these are decoded: a `where` or `item` that happens to read "nan" stays text.
NUMERIC = ("seconds", "max_margin", "observed", "threshold", "margin")


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    directory: Path
    provenance: dict
    key_fields: tuple[str, ...]  # the VERDICT_KEYS this file carries
    verdicts: pd.DataFrame  # VERDICT_COLUMNS + key, anchor; in the order the run wrote them
    rows: pd.DataFrame  # ROW_COLUMNS + key
    unfinished: str = ""  # a sentence when the run never wrote results.json (what its results.jsonl kept), else ""
    damage: tuple[str, ...] = ()  # each golden or cached checkpoint an engine changed during the run: the run is not green
    properties: tuple[dict, ...] = ()  # the pytest plugin's hypothesis property tests: test, scenario, engine, family, outcome, message

    @property
    def comparisons(self) -> pd.DataFrame:
        """One row per comparison (the results schema calls them `rows`)."""
        return self.rows

    def rows_of(self, key: tuple) -> pd.DataFrame:
        # Not `rows["key"] == key`: pandas compares a tuple element-wise when the lengths happen to match.
        # `.loc` with a boolean array: a plain empty list would select zero *columns*.
        return self.rows.loc[[k == key for k in self.rows["key"]]] if len(self.rows) else self.rows

    def varying_fields(self) -> list[str]:
        """Key fields beyond engine, family and scenario (dtype, device, ...) that take several values here."""
        return [f for f in VERDICT_KEYS if f not in ("engine", "family", "scenario") and self.verdicts[f].nunique() > 1]


def describe(v) -> str:
    """A verdict's key without its scenario, as headings print it: engine / family / dtype / device."""
    return " / ".join(str(getattr(v, f)) for f in VERDICT_KEYS if f != "scenario" and getattr(v, f) != "")


def as_float(value) -> float:
    """A number from results.json: None and "" are NaN, "inf"/"-inf"/"nan" are what they say."""
    if value is None or value == "":
        return math.nan
    return float(value)


def format_margin(value) -> str:
    """observed / allowed as reports print it: 2.6e-05, 3.4e+10, inf; blank when there is none."""
    if value is None:
        return ""
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return "0" if value == 0 else f"{value:.1e}"


def floor_text(v) -> str:
    """A verdict's worst comparison as a multiple of the reference's noise floor ("0.48x floor"), where a calibrated
    table judged it (float32, bfloat16; harness/compare/comparison.py, floor_ratio); else ""."""
    ratio = v.worst.get("floor_ratio") if isinstance(v.worst, dict) else None
    return "" if ratio is None or math.isnan(ratio) else f"{short_number(ratio)}x floor"


def format_number(value) -> str:
    """An observed or allowed error: three significant digits."""
    value = as_float(value)
    return f"{value:.3g}" if math.isfinite(value) else format_margin(value)


def _frame(records: list[dict], columns: tuple[str, ...]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(records, columns=list(columns))
    for column in VERDICT_KEYS:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), "")
    for column in NUMERIC:
        if column in frame:
            frame[column] = frame[column].map(as_float).astype(float)
    frame["key"] = [tuple(r) for r in frame[list(VERDICT_KEYS)].itertuples(index=False)]
    return frame


def _anchor(index: int, key: tuple) -> str:
    return f"v{index}-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(map(str, key))).strip("-")


def load_run(directory: str | Path) -> Run:
    """The run in `directory` (a `packcheck run --out`): results.json, or what results.jsonl kept of an
    unfinished run. Non-finite numbers are floats again; a file that is not a packcheck results file
    raises ResultsProblem naming the file and what is wrong."""
    data = load_results(RunDir(directory))
    present = {k for record in data.get("verdicts", []) for k in record}
    verdicts = _frame(data.get("verdicts", []), VERDICT_COLUMNS)
    verdicts["worst"] = [
        None if not isinstance(w, dict) else w | {k: as_float(w[k]) for k in (*NUMERIC, "floor_ratio") if k in w}
        for w in verdicts["worst"]
    ]
    verdicts["known_finding"] = verdicts["known_finding"].astype(object).where(verdicts["known_finding"].notna(), "")  # older runs lack it
    rows = _frame([r | {"allowed_by": allowed_by(r)} for r in data.get("rows", [])], ROW_COLUMNS)
    for column in ("arm", "against"):  # older runs wrote only the display text: no per-token evidence is drawn for them
        rows[column] = rows[column].astype(object).where(rows[column].notna(), "")
    verdicts["anchor"] = [_anchor(i, key) for i, key in enumerate(verdicts["key"])]
    return Run(
        directory=Path(directory),
        provenance=dict(data.get("provenance") or {}),
        key_fields=tuple(k for k in VERDICT_KEYS if k in present),
        verdicts=verdicts,
        rows=rows,
        unfinished=str(data.get("unfinished", "")),
        damage=tuple(str(d) for d in data.get("damage", [])),
        properties=tuple(p for p in data.get("properties", []) if isinstance(p, dict)),
    )


def allowed_by(row: dict) -> str:
    """The derived term that set a row's threshold, in words (Bound.describe); "" where the table did or the run predates bounds."""
    return Bound.from_json(row["bound"]).describe() if isinstance(row.get("bound"), dict) else ""


def status_counts(verdicts: pd.DataFrame) -> dict[str, int]:
    """How many verdicts have each status, every status present (zeros included), known ones first."""
    counts = verdicts["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in STATUSES} | {s: int(n) for s, n in counts.items() if s not in STATUSES}
