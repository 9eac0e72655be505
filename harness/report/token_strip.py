"""A token strip: per-token errors laid out in the rows of the harness's canonical packing, as
SVG geometry (numbers only; the template draws it and escapes every text).

One band per row of the layout of the arm TokenErrors chose (packcheck.harness.contract.rows.layout_rows): documents
in row order with their boundaries drawn in, padding greyed, and the CP shard cuts (multiples of
width / cp, see _cuts) dashed when the case runs context parallel. Each token is coloured by its error in
multiples of the allowed error; runs of equal colour are merged into one rectangle. The words
under it come from token_findings.py.
"""

from __future__ import annotations

import math

from packcheck.harness.contract import LayoutKind
from packcheck.harness.contract.rows import Row, layout_rows
from packcheck.harness.report.load import format_number
from packcheck.harness.report.token_errors import TokenErrors
from packcheck.harness.report.token_findings import PlacedRow, summarise

GEOMETRY = {"label": 118, "row": 16, "gap": 7, "top": 6, "max_row": 720, "max_cell": 12}
# (class, upper bound of observed / allowed, legend); the last bucket takes everything above.
BUCKETS = (("t-exact", 0.0, "exact"), ("t-low", 1e-3, "< allowed / 1000"), ("t-near", 1.0, "< allowed"),
           ("t-bad1", 1e3, "1-1e3 x allowed"), ("t-bad2", 1e6, "1e3-1e6 x"), ("t-bad3", 1e9, "1e6-1e9 x"), ("t-bad4", math.inf, "> 1e9 x"))
LEGEND = [{"cls": c, "text": t} for c, _, t in BUCKETS] + [{"cls": "t-pad", "text": "padding"}, {"cls": "t-none", "text": "not compared"}]
MAX_FINDINGS = 6  # rows listed under a strip


def _px(value: float) -> float | int:
    """An SVG coordinate: 96, not 96.0; two decimals at most."""
    value = round(float(value), 2)
    return int(value) if value.is_integer() else value


def _cuts(width: int, cp: int) -> list[int]:
    """Row positions where CP shards begin: equal shards of ceil(width / cp) tokens (a row cp does not
    divide is padded at its end, never split unevenly), so cuts at multiples of width / cp."""
    shard = -(-width // cp)
    return [k * shard for k in range(1, cp) if k * shard < width]


def bucket(error: float | None, threshold: float) -> str:
    if error is None:
        return "t-none"
    if math.isnan(error):
        return BUCKETS[-1][0]
    if error == 0:
        return "t-exact"
    ratio = error / threshold if threshold > 0 else math.inf
    return next(cls for cls, upper, _ in BUCKETS[1:] if ratio < upper or upper == math.inf)


def _row_label(row: Row, ranks: int, steps: int, per_sample: bool) -> str:
    parts = [f"rank {row.rank}"] if ranks > 1 else []
    parts += [f"mb {row.step}"] if steps > 1 else []
    parts.append(f"sample {row.samples[0]}" if per_sample else f"row {row.index}")
    return " · ".join(parts)


def _runs(classes: list[str], px: float) -> list[dict]:
    """Consecutive tokens of one class as one rectangle."""
    runs: list[dict] = []
    for position, cls in enumerate(classes):
        if runs and runs[-1]["cls"] == cls:
            runs[-1]["w"] = _px(runs[-1]["w"] + px)
        else:
            runs.append({"x": _px(position * px), "w": _px(px), "cls": cls})
    return runs


def _band(strip: TokenErrors, placed: PlacedRow, y: float) -> dict:
    case, row = strip.case, placed.row
    px = min(GEOMETRY["max_cell"], GEOMETRY["max_row"] / row.width)
    classes = ["t-pad"] * row.width
    docs = []
    for d, (i, start) in enumerate(zip(row.samples, placed.starts)):
        errors = strip.errors[i]
        length = len(case.samples[i].input_ids)
        if errors is None:
            classes[start:start + length] = ["t-none"] * length
            tip = "not compared: the arms hold different samples here"
        else:
            classes[start:start + length] = [bucket(e, strip.threshold) for e in errors]
            worst = max(range(length), key=lambda t: math.inf if math.isnan(errors[t]) else errors[t])
            tip = f"worst {format_number(errors[worst])} at token {worst} (allowed {format_number(strip.threshold)})"
        docs.append({"x": _px(start * px), "w": _px(length * px), "tip": f"sample {i}, document {d + 1} of {len(placed.starts)} "
                     f"in {placed.label}, row positions {start}-{start + length - 1}: {tip}"})
    return {
        "label": placed.label, "y": y, "width": _px(row.width * px), "runs": _runs(classes, px), "docs": docs,
        "boundaries": [_px(s * px) for s in placed.starts if 0 < s < row.width], "cuts": [_px(c * px) for c in placed.cuts],
    }


def token_strip(strip: TokenErrors) -> dict:
    """Template geometry for one strip: bands (one per row), legend, findings."""
    case = strip.case
    rows = list(layout_rows(case))
    ranks, steps = case.partition.dp, max(len(r) for r in case.micro_batches_by_rank)
    per_sample = case.layout.kind is not LayoutKind.PACKED
    placed = [PlacedRow(_row_label(row, ranks, steps, per_sample), row, row.starts(case), _cuts(row.width, case.parallel.cp))
              for row in rows]
    bands = [_band(strip, p, GEOMETRY["top"] + n * (GEOMETRY["row"] + GEOMETRY["gap"])) for n, p in enumerate(placed)]
    summary, findings = summarise(strip, placed)
    width = GEOMETRY["label"] + max(b["width"] for b in bands) + 8
    return {
        "arms": str(strip.arms), "what": strip.what, "failed": strip.failed, "threshold": format_number(strip.threshold),
        "layout": case.describe(), "cp": case.parallel.cp, "bands": bands, "geometry": GEOMETRY, "legend": LEGEND,
        "width": _px(width), "height": GEOMETRY["top"] + len(bands) * (GEOMETRY["row"] + GEOMETRY["gap"]),
        "summary": summary,
        "findings": findings[:MAX_FINDINGS], "more_findings": max(0, len(findings) - MAX_FINDINGS),
    }
