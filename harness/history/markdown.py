"""The history's Markdown summary for a CI comment: the steps found (regressions first), the status changes, and what
`--fail-on-step` decided; the HTML page has the charts."""

from __future__ import annotations

import re
from collections import Counter

from packcheck.harness.history.page import status_rows, step_rows
from packcheck.harness.history.series import Series
from packcheck.harness.history.store import History

LISTED = 40  # rows per table; GitHub caps a comment at 65536 characters


def _cell(value) -> str:
    """Store text on one line, safe in a table cell: no pipes, no raw HTML."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", re.sub(r"\s+", " ", str(value)).strip()).replace("|", "\\|")


def render_markdown(history: History, label: str, found: list[Series], failing: list | None = None, level: float | None = None) -> str:
    steps = sorted(step_rows(found), key=lambda s: not s["up"])  # regressions first, each group in the page's order
    changes = status_rows(found)
    sources = ", ".join(f"{n} {s}" for s, n in Counter(history.runs["source"]).items())
    lines = ["## packcheck history", "",
             f"Store `{history.path}`: {len(history.runs)} runs ({sources or 'none'}), {len(found)} cells with a margin; x axis: {label}. "
             f"{len(steps)} step{'s' * (len(steps) != 1)} found, {sum(s['up'] for s in steps)} up.", ""]
    if failing is not None:
        lines += ([f"**--fail-on-step: {len(failing)} cell{'s' * (len(failing) != 1)} regressed** (last step up, to {level} of the "
                   "tolerance or more): " + "; ".join(f"{_cell(s.name)} {step.before:.2g} -> {step.after:.2g}" for s, step in failing), ""]
                  if failing else [f"--fail-on-step: no cell's last step is a regression to {level} of the tolerance or more.", ""])
    if steps:
        lines += ["### Steps", "", "| step | cell | at | error/tolerance | factor | what changed |", "|---|---|---|---|---|---|"]
        lines += [f"| {s['id']} | {_cell(s['cell'])} | {_cell(s['between'])} | {s['before']} -> {s['after']} | "
                  f"{'**' + s['factor'] + ' up**' if s['up'] else s['factor'] + ' down'} | {_cell(s['what'])} |" for s in steps[:LISTED]]
        lines += [f"", f"... and {len(steps) - LISTED} more on the page."] if len(steps) > LISTED else []
        lines.append("")
    if changes:
        lines += ["### Status changes", "", "| cell | at | status | what changed |", "|---|---|---|---|"]
        lines += [f"| {_cell(c['cell'])} | {_cell(c['between'])} | {c['before']} -> {c['after']} | {_cell(c['what'])} |"
                  for c in changes[:LISTED]]
        lines += [f"", f"... and {len(changes) - LISTED} more on the page."] if len(changes) > LISTED else []
        lines.append("")
    return "\n".join(lines)
