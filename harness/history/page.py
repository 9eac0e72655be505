"""The history page: one self-contained HTML file, the report's look (its stylesheet, harness/report/templates/report.css),
inline SVG and no script at all (its Content-Security-Policy allows none).

Top to bottom: what the store holds (runs by source, the x axis in use), the steps found (each with the margins before
and after, and what changed in the environment and the engine between the two runs), the cells `--fail-on-step` fails,
one chart per cell (cells with a step or a status change first), the status changes, the bisect probes and the runs. Everything from the store (engine names, notes, commands) reaches the page through Jinja2's autoescaping.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path

import jinja2

from packcheck.harness.files import write_atomically
from packcheck.harness.history.chart import chart
from packcheck.harness.history.series import Series
from packcheck.harness.history.steps import MIN_GROUPS
from packcheck.harness.history.store import ENVIRONMENT_COLUMNS, History
from packcheck.harness.report.load import format_margin

TEMPLATES = Path(__file__).parent / "templates"
REPORT_TEMPLATES = Path(__file__).parents[1] / "report" / "templates"
SPREAD = {"repeated runs": "the repeated runs at one x", "successive differences": "the successive differences of the x"}


def spread_text(fit) -> str:
    """The noise band in words: its sigma, and where it came from."""
    band = f"noise band: each level +- 2 sigma, sigma = {fit.sigma:.2g} in log10 (a factor {10 ** fit.sigma:.2g})"
    if fit.measured is None:
        return f"{band}, the floor (no x run twice, fewer than {MIN_GROUPS} x: no spread to measure)"
    if fit.measured < fit.sigma:
        return f"{band}, the floor ({SPREAD[fit.spread_from]} measured {fit.measured:.2g})"
    return f"{band}, measured from {SPREAD[fit.spread_from]}"
LABEL_NAMES = {"release": "the engine's version (its releases); one x per version, in the order of the runs' time",
               "commit": "the engine's commit; one x per commit, along the history where each commit's depth is known, else in "
                         "the order of the runs' time", "time": "the run's time; one x per run"}


def step_rows(found: list[Series]) -> list[dict]:
    """Every step found, in the order of the cells, numbered S1, S2, ... as the charts mark them."""
    rows = []
    for series in found:
        for step, change in zip(series.fit.steps if series.fit else (), series.step_changes):
            before, after = series.groups[series.fitted[series.fitted.index(change.at) - 1]], series.groups[change.at]
            rows.append({"id": f"S{len(rows) + 1}", "cell": series.name, "anchor": anchor(series), "at": change.at,
                         "before_label": before.label, "after_label": after.label,
                         "between": f"{before.short} -> {after.short}", "before": format_margin(step.before),
                         "after": format_margin(step.after), "factor": f"x{step.factor:.3g}", "up": step.up,
                         "sigma": f"{step.sigma:.0f}", "status": f"{before.status} -> {after.status}",
                         "crosses": (step.before < 1) != (step.after < 1), "what": "; ".join(change.what) or "nothing recorded changed"})
    return rows


def status_rows(found: list[Series]) -> list[dict]:
    return [{"cell": s.name, "anchor": anchor(s), "before_label": s.groups[c.at - 1].label, "after_label": s.groups[c.at].label,
             "between": f"{s.groups[c.at - 1].short} -> {s.groups[c.at].short}",
             "before": s.groups[c.at - 1].status, "after": s.groups[c.at].status, "what": "; ".join(c.what) or "nothing recorded changed"}
            for s in found for c in s.status_changes]


def anchor(series: Series) -> str:
    import re

    return "c-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(series.cell)).strip("-")


def bisect_rows(history: History) -> list[dict]:
    """Every bisect probe in the store: the commit it judged, the range and family it was judged for, its verdicts."""
    runs = history.runs[history.runs["source"] == "bisect"]
    rows = []
    for run in runs.to_dict("records"):
        mine = history.verdicts[history.verdicts["run_id"] == run["id"]]
        commits = sorted({c for c in mine["engine_commit"] if c})
        counts = Counter(mine["status"])
        rows.append({"time": run["time"], "commit": ", ".join(commits) or "unknown", "note": run["note"] or "",
                     "statuses": ", ".join(f"{n} {s}" for s, n in counts.items()),
                     "families": ", ".join(sorted(set(mine["family"])))})
    return rows


def run_rows(history: History) -> list[dict]:
    columns = [c for c in ENVIRONMENT_COLUMNS if history.runs[c].fillna("").astype(str).str.len().gt(0).any()]
    return [{"id": r["id"], "time": r["time"], "source": r["source"], "note": r["note"] or "", "command": r["command"] or "",
             "environment": [str(r[c] or "") for c in columns], "packcheck_commit": (r["packcheck_commit"] or "")[:10]}
            for r in history.runs.to_dict("records")], columns


def render_page(history: History, label: str, found: list[Series], failing: list | None = None, level: float | None = None) -> str:
    steps = step_rows(found)
    ids = {(row["cell"], row["at"]): row["id"] for row in steps}
    marked = [s for s in found if (s.fit and s.fit.steps) or s.status_changes]
    quiet = [s for s in found if s not in marked]
    runs, columns = run_rows(history)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([TEMPLATES, REPORT_TEMPLATES]), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)

    def card(series: Series) -> dict:
        fit = series.fit
        return {"name": series.name, "anchor": anchor(series), "chart": chart(series, ids), "steps": len(fit.steps) if fit else 0,
                "spread": spread_text(fit) if fit else "one x with a margin: nothing to fit",
                "last": series.groups[-1].status, "latest": format_margin(series.groups[-1].margins[-1]) if series.groups[-1].margins else ""}

    return env.get_template("history.html.j2").render(
        store=str(history.path), generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        runs_by_source=dict(Counter(history.runs["source"])), run_count=len(history.runs), cell_count=len(found),
        label=label, label_text=LABEL_NAMES.get(label, f"the environment's {label}; one x per value, in the order of the runs' time"), steps=steps,
        regressions=sum(r["up"] for r in steps), status_changes=status_rows(found), bisect=bisect_rows(history),
        failing=[{"cell": s.name, "anchor": anchor(s), "before": format_margin(step.before), "after": format_margin(step.after),
                  "factor": f"x{step.factor:.3g}"} for s, step in failing or ()],
        gate=failing is not None, level=level, marked=[card(s) for s in marked], quiet=[card(s) for s in quiet],
        runs=runs, columns=columns)


def write_page(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)
    return path
