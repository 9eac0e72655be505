"""A run against a baseline run: the verdicts whose status changed, and every verdict's max margin
(observed / allowed error) before and after, largest increase first. The HTML report and the
Markdown summary both show it."""

from __future__ import annotations

import math

from packcheck.harness.judging.status import Status
from packcheck.harness.report.load import Run, format_margin


def sort_key(margin: float) -> float:
    """Worst first: a NaN margin (observed NaN) ranks with inf."""
    return math.inf if math.isnan(margin) else margin


def margin_text(v) -> str:
    """A verdict's max margin as text; blank when it has no comparison (unsupported, crashed)."""
    return format_margin(v.max_margin) if v.worst else ""


def _factor(before: float, after: float) -> tuple[str, str, float]:
    """after / before as text, a class (worse: 10x up, better: 10x down, same), and a sort key."""
    if math.isfinite(before) and math.isfinite(after) and before > 0 and after > 0:
        ratio = after / before
        return f"x{ratio:.2g}", "worse" if ratio >= 10 else "better" if ratio <= 0.1 else "same", ratio
    if format_margin(before) == format_margin(after):
        return "", "same", 1.0
    worse = sort_key(after) > sort_key(before)
    return ("up" if worse else "down"), ("worse" if worse else "better"), (math.inf if worse else 0.0)


def compare_runs(run: Run, base: Run) -> dict:
    """Verdicts whose status changed (or that appear in one run only), and margins before and after.

    Verdicts are matched on the key fields both files carry, so a baseline written before a key
    field existed still lines up.
    """
    fields = [f for f in run.key_fields if f in base.key_fields]
    before = {tuple(getattr(v, f) for f in fields): v for v in base.verdicts.itertuples(index=False)}
    after = {tuple(getattr(v, f) for f in fields): v for v in run.verdicts.itertuples(index=False)}
    changed, both = [], []
    for key in list(after) + [k for k in before if k not in after]:
        b, a = before.get(key), after.get(key)
        entry = {"key": " / ".join(map(str, key)), "anchor": a.anchor if a is not None else None,
                 "before": b.status if b is not None else "absent", "after": a.status if a is not None else "absent",
                 "before_margin": margin_text(b) if b is not None else "", "after_margin": margin_text(a) if a is not None else ""}
        if entry["before"] != entry["after"] and {entry["before"], entry["after"]} != {Status.UNSUPPORTED, "absent"}:
            changed.append(entry)  # a cell unsupported in one run and not run in the other tested nothing either way
        if a is not None and b is not None:
            entry["factor"], entry["trend"], entry["order"] = _factor(b.max_margin, a.max_margin)
            both.append(entry)
    both.sort(key=lambda e: -e["order"])
    return {"directory": str(base.directory), "provenance": base.provenance, "changed": changed, "both": both}
