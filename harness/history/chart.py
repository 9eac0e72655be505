"""One cell's margins over the runs as SVG geometry: the template draws it from these numbers alone (no script).

The y axis is log10(error / tolerance), with the tolerance line (1) always in range; x is one slot per label (a
commit, a release), its runs' points stacked in it. Drawn: the noise band (each fitted level +- 2 sigma), the fitted
levels, the steps (dashed, red up, green down), the status changes (a triangle on the top edge), and every point
coloured by its verdict's status; a point without a margin (unsupported, crashed) is a cross on the bottom edge.
"""

from __future__ import annotations

import math

from packcheck.harness.history.series import Series
from packcheck.harness.history.steps import MARGIN_CEILING, MARGIN_FLOOR, log_margin
from packcheck.harness.report.load import format_margin

GEOMETRY = {"left": 58, "right": 18, "top": 16, "plot": 150, "bottom": 58, "width": 620}
MAX_X_LABELS = 24


def _range(values: list[float]) -> tuple[int, int]:
    lo, hi = min(values + [0.0]), max(values + [0.0])
    return math.floor(lo - 0.3), max(math.ceil(hi + 0.3), math.floor(lo - 0.3) + 1)


def chart(series: Series, step_ids: dict[tuple[str, int], str]) -> dict:
    """The SVG geometry of `series`; `step_ids` names each step ((series name, group index) -> "S3") as the tables do."""
    g = GEOMETRY
    width = g["width"] - g["left"] - g["right"]
    n = len(series.groups)
    slot = width / n
    fit = series.fit
    logs = [log_margin(m) for group in series.groups for m in group.margins]
    bands = []
    if fit is not None:
        for k, i in enumerate(series.fitted):
            low, high = fit.band(k)
            bands.append((i, log_margin(low), log_margin(high), log_margin(fit.levels[k])))
        logs += [b[1] for b in bands] + [b[2] for b in bands]
    lo, hi = _range(logs)

    def x(index: float) -> float:
        return round(g["left"] + (index + 0.5) * slot, 1)

    def y(value: float) -> float:
        return round(g["top"] + (hi - value) / (hi - lo) * g["plot"], 1)

    step = max(1, math.ceil((hi - lo) / 8))
    ticks = [{"y": y(e), "text": f"1e{e}" if e else "1"} for e in range(lo, hi + 1, step)]
    points = []
    for i, group in enumerate(series.groups):
        for point in group.points:
            tip = (f"{group.label}: error/tolerance {format_margin(point.margin) or 'none'} ({point.status}"
                   f"{'; worst ' + point.worst if point.worst else ''}); run {point.run_id}, {point.time}, {point.source}"
                   f"{'; ' + point.note if point.note else ''}")
            if math.isnan(point.margin):
                points.append({"x": x(i), "y": y(lo) - 4, "cls": point.status.replace(" ", "-"), "none": True, "tip": tip})
            else:
                points.append({"x": x(i), "y": y(log_margin(point.margin)), "cls": point.status.replace(" ", "-"), "none": False, "tip": tip})
    # each fitted segment as one band and one level line, from its first slot's left edge to its last slot's right edge
    segments = []
    for i, low, high, level in bands:
        if segments and abs(segments[-1]["level"] - level) < 1e-12:
            segments[-1]["x2"] = round(x(i) + slot / 2, 1)
        else:
            segments.append({"x1": round(x(i) - slot / 2, 1), "x2": round(x(i) + slot / 2, 1), "level": level,
                             "y_low": y(low), "y_high": y(high), "y": y(level)})
    for s in segments:
        s["height"] = round(s["y_low"] - s["y_high"], 1)
    steps = [{"x": round(x(c.at) - slot / 2, 1), "up": s.up, "id": step_ids.get((series.name, c.at), ""),
              "tip": f"{'up' if s.up else 'down'} x{s.factor:.3g}: {format_margin(s.before)} -> {format_margin(s.after)}"
                     f"{' (' + '; '.join(c.what) + ')' if c.what else ''}"}
             for s, c in zip(fit.steps if fit else (), series.step_changes)]
    changes = [{"x": round(x(c.at) - slot / 2, 1), "tip": f"status {series.groups[c.at - 1].status} -> {series.groups[c.at].status}"
                + (f" ({'; '.join(c.what)})" if c.what else "")} for c in series.status_changes]
    every = max(1, math.ceil(n / MAX_X_LABELS))
    labels = [{"x": x(i), "text": group.short[:14], "tip": group.label} for i, group in enumerate(series.groups) if i % every == 0]
    return {"width": g["width"], "height": g["top"] + g["plot"] + g["bottom"], "left": g["left"], "right": g["width"] - g["right"],
            "top": g["top"], "bottom": g["top"] + g["plot"], "label_y": g["top"] + g["plot"] + 14, "ticks": ticks,
            "tolerance": y(0.0), "points": points, "segments": segments, "steps": steps, "changes": changes, "labels": labels,
            "clamped": any(not MARGIN_FLOOR <= m <= MARGIN_CEILING for group in series.groups for m in group.margins)}
