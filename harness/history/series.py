"""Each cell's margins over the runs of a store, in run order, with its steps and status changes.

A cell is engine x family x scenario x dtype x device x attention, as in a run. Its points are its verdicts in the
store's runs, ordered by the runs' time; points with one label (a commit, a release) form one x, in the order each
label first appears (a commit judged twice is one x with two runs: its spread is measured there). The label:

- `release`: the engine's version (its releases, e.g. "transformers 4.46.1, accelerate 1.2.1": harness/engines/info.py);
- `commit`: the engine's commit (an engine in a git checkout; bisect probes), in their order along the history where
  each commit's depth is known (a bisect judges them out of order);
- `time`: every run its own x;
- an environment column (`transformers`, `torch`, `gpu`, ...): its value;
- `auto` (the default): the engine's commit where the store's runs differ in it, else its version, else the first
  environment column that differs, else time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from packcheck.harness.history.changes import changes, short_commit
from packcheck.harness.history.steps import Fit, fit
from packcheck.harness.history.store import CELL, ENVIRONMENT_COLUMNS, History

LABELS = ("auto", "release", "commit", "time", *ENVIRONMENT_COLUMNS)
FAILED = ("fail", "error", "hang")
KNOWN = "known finding"


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    run_id: int
    time: str
    source: str
    note: str
    status: str  # pass | fail | error | hang | unsupported | known finding (a failing verdict that reproduces a pinned finding)
    margin: float  # NaN: no comparison (unsupported, crashed)
    worst: str  # the worst comparison's quantity and metric
    row: dict  # the verdict joined with its run, for what changed (harness/history/changes.py)


@dataclass(kw_only=True, slots=True)
class Group:
    label: str  # what the x is: "transformers 4.46.1, accelerate 1.2.1", a commit, a time
    short: str  # as the axis prints it
    points: list[Point] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The x's status: a known finding, else the first failing status, else pass, else unsupported."""
        statuses = [p.status for p in self.points]
        return next((s for s in (KNOWN, *FAILED, "pass") if s in statuses), statuses[0])

    @property
    def rows(self) -> list[dict]:
        """Its runs' verdict rows (joined with the runs), for what changed (harness/history/changes.py)."""
        return [p.row for p in self.points]

    @property
    def margins(self) -> list[float]:
        return [p.margin for p in self.points if not math.isnan(p.margin)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """A step (or a status change) between group `at - 1` and group `at`, with what changed between their runs."""

    at: int
    what: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    cell: tuple[str, ...]  # CELL's values
    groups: tuple[Group, ...]
    fit: Fit | None  # over the groups with a margin (`fitted`: their indices); None when fewer than 2 have one
    fitted: tuple[int, ...]
    step_changes: tuple[Change, ...]  # per step of the fit, in order: its x (a group index) and what changed there
    status_changes: tuple[Change, ...]  # every x whose status differs from the x before it

    @property
    def name(self) -> str:
        return " / ".join(v for v in self.cell if v)


def joined(history: History):
    """The verdicts with their runs' columns, in run order (time, then the order recorded)."""
    runs = history.runs.rename(columns={"id": "run_id"})
    frame = history.verdicts.merge(runs, on="run_id", how="left", suffixes=("", "_run"))
    return frame.sort_values(["time", "run_id"], kind="stable").reset_index(drop=True)


def _text(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _varies(frame, column: str) -> bool:
    return column in frame and len({v for v in frame[column].map(_text) if v}) > 1


def choose_label(frame, label: str = "auto") -> str:
    """The label `auto` stands for in this store (see the module's docstring); any other is itself."""
    if label not in LABELS:
        raise ValueError(f"--x {label!r}: use one of {', '.join(LABELS)}")
    if label != "auto":
        return label
    for column, name in (("engine_commit", "commit"), ("engine_version", "release")):
        if _varies(frame, column):
            return name
    return next((c for c in ENVIRONMENT_COLUMNS if _varies(frame, c)), "time")


def _label(row: dict, label: str) -> tuple[str, str]:
    """(label, short label) of a verdict row under `label`."""
    if label == "release":
        version = _text(row.get("engine_version")) or "unknown version"
        return version, version.split(", ")[0].split(" ")[-1]
    if label == "commit":
        commit = _text(row.get("engine_commit"))
        return (commit, short_commit(commit)[:8]) if commit else ("no commit", "?")
    if label == "time":
        return f"{row['time']} (run {row['run_id']})", _text(row["time"])[5:16].replace("T", " ")
    value = _text(row.get(label)) or "unknown"
    return f"{label} {value}", value


def _along_history(groups: tuple[Group, ...]) -> tuple[Group, ...]:
    """Commits in their order along the history (each commit's depth, `git rev-list --count`) where every commit's is
    known: a bisect judges them out of order; else in the order of the runs."""
    depths = [g.points[0].row.get("engine_commit_depth") for g in groups]
    if any(d is None or d != d for d in depths):  # None, or NaN as pandas reads a NULL
        return groups
    return tuple(g for _, g in sorted(zip(depths, groups), key=lambda pair: pair[0]))  # stable: a dirty commit after its HEAD's runs


def _status(row: dict) -> str:
    return KNOWN if _text(row.get("known_finding")) else _text(row.get("status"))


def series_of(history: History, label: str = "auto") -> tuple[str, list[Series]]:
    """The label used, and every cell's series with at least one margin, in the order cells first appear."""
    frame = joined(history)
    if frame.empty:
        return choose_label(frame, label) if label != "auto" else "time", []
    label = choose_label(frame, label)
    cells: dict[tuple, dict[str, Group]] = {}
    for row in frame.to_dict("records"):
        cell = tuple(_text(row[c]) for c in CELL)
        text, short = _label(row, label)
        group = cells.setdefault(cell, {}).setdefault(text, Group(label=text, short=short))
        worst = " ".join(filter(None, (_text(row.get("worst_quantity")), _text(row.get("worst_metric")))))
        group.points.append(Point(run_id=int(row["run_id"]), time=_text(row["time"]), source=_text(row["source"]), note=_text(row["note"]),
                                  status=_status(row), margin=float(row["max_margin"]), worst=worst, row=row))
    found = []
    for cell, by_label in cells.items():
        groups = tuple(by_label.values())
        if label == "commit":
            groups = _along_history(groups)
        fitted = tuple(i for i, g in enumerate(groups) if g.margins)
        if not fitted:
            continue  # never compared anything (unsupported everywhere): nothing to draw
        result = fit([groups[i].margins for i in fitted]) if len(fitted) >= 2 else None
        step_changes = tuple(Change(at=fitted[s.at], what=tuple(changes(groups[fitted[s.at - 1]].rows, groups[fitted[s.at]].rows)))
                             for s in (result.steps if result else ()))
        status_changes = tuple(Change(at=i, what=tuple(changes(groups[i - 1].rows, groups[i].rows)))
                               for i in range(1, len(groups)) if groups[i].status != groups[i - 1].status)
        found.append(Series(cell=cell, groups=groups, fit=result, fitted=fitted, step_changes=step_changes, status_changes=status_changes))
    return label, found
