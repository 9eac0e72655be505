"""A token strip: per-token errors laid out in the rows of the harness's canonical packing, as
SVG geometry (numbers only; the template draws it and escapes every text).

One band per row of the observed arm's layout (harness.data.packing.layout_rows): documents
in row order with their boundaries drawn in, padding greyed, and the CP shard cuts (multiples of
width / cp) dashed when the case runs context parallel. Each token is coloured by its error in
multiples of the allowed error; runs of equal colour are merged into one rectangle. The findings
say where the error starts in each row: a cross-document leak starts at a boundary and leaves the
first document of the row exact; a shard-local bug starts at a cut.
"""

from __future__ import annotations

import math

from harness.data.packing import Row, layout_rows
from harness.report.load import format_number
from harness.report.token_errors import TokenErrors

GEOMETRY = {"label": 118, "row": 16, "gap": 7, "top": 6, "max_row": 720, "max_cell": 12}
# (class, upper bound of observed / allowed, legend); the last bucket takes everything above.
BUCKETS = (("t-exact", 0.0, "exact"), ("t-low", 1e-3, "< allowed / 1000"), ("t-near", 1.0, "< allowed"),
           ("t-bad1", 1e3, "1-1e3 x allowed"), ("t-bad2", 1e6, "1e3-1e6 x allowed"), ("t-bad3", math.inf, "> 1e6 x allowed"))
LEGEND = [{"cls": c, "text": t} for c, _, t in BUCKETS] + [{"cls": "t-pad", "text": "padding"}, {"cls": "t-none", "text": "not compared"}]
MAX_FINDINGS = 6


def _px(value: float) -> float | int:
    """An SVG coordinate: 96, not 96.0; two decimals at most."""
    value = round(float(value), 2)
    return int(value) if value.is_integer() else value


def bucket(error: float | None, threshold: float) -> str:
    if error is None:
        return "t-none"
    if math.isnan(error):
        return BUCKETS[-1][0]
    if error == 0:
        return "t-exact"
    ratio = error / threshold if threshold > 0 else math.inf
    return next(cls for cls, upper, _ in BUCKETS[1:] if ratio < upper or upper == math.inf)


def _bad(error: float | None, threshold: float) -> bool:
    return error is not None and (math.isnan(error) or error > threshold)


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


def _finding(strip: TokenErrors, row: Row, starts: list[int], label: str, cuts: list[float]) -> str | None:
    """Where the error starts in this row, in words; None when the row is within tolerance."""
    for d, (i, start) in enumerate(zip(row.samples, starts)):
        errors = strip.errors[i] or []
        t = next((t for t, e in enumerate(errors) if _bad(e, strip.threshold)), None)
        if t is None:
            continue
        position = start + t
        where = f"{label}: starts at position {position}, sample {i} token {t}"
        if d > 0 and t <= 1:
            return f"{where}, the {'first token' if t == 0 else 'first target'} of document {d + 1} of {len(starts)}: at a document boundary"
        if any(abs(position - cut) <= 1 for cut in cuts):
            return f"{where}: at a CP shard cut"
        return f"{where}, inside document {d + 1} of {len(starts)}"
    return None


def _band(strip: TokenErrors, row: Row, label: str, y: float) -> tuple[dict, str | None]:
    case = strip.case
    px = min(GEOMETRY["max_cell"], GEOMETRY["max_row"] / row.width)
    starts = row.starts(case)
    classes = ["t-pad"] * row.width
    docs = []
    for d, (i, start) in enumerate(zip(row.samples, starts)):
        errors = strip.errors[i]
        length = len(case.samples[i].input_ids)
        if errors is None:
            classes[start:start + length] = ["t-none"] * length
            tip = "not compared: the arms hold different samples here"
        else:
            classes[start:start + length] = [bucket(e, strip.threshold) for e in errors]
            worst = max(range(length), key=lambda t: math.inf if math.isnan(errors[t]) else errors[t])
            tip = f"worst {format_number(errors[worst])} at token {worst} (allowed {format_number(strip.threshold)})"
        docs.append({"x": _px(start * px), "w": _px(length * px),
                     "tip": f"sample {i}, document {d + 1} of {len(starts)} in {label}, row positions {start}-{start + length - 1}: {tip}"})
    cp = case.parallel.cp
    cuts = [row.width * k / cp for k in range(1, cp)]
    band = {
        "label": label, "y": y, "width": _px(row.width * px), "runs": _runs(classes, px), "docs": docs,
        "boundaries": [_px(s * px) for s in starts if 0 < s < row.width],
        "cuts": [_px(c * px) for c in cuts],
    }
    return band, _finding(strip, row, starts, label, cuts)


def _summary(strip: TokenErrors, findings: list[str], bands: int) -> str:
    if not findings:
        return f"Every token within tolerance ({bands} rows)."
    at_boundary = sum("document boundary" in f for f in findings)
    text = f"{len(findings)} of {bands} rows out of tolerance"
    if at_boundary == len(findings):
        text += "; in every one the error starts at a document boundary and the row's first document is exact: information crosses documents"
    elif at_boundary:
        text += f"; in {at_boundary} the error starts at a document boundary"
    return text + "."


def token_strip(strip: TokenErrors) -> dict:
    """Template geometry for one strip: bands (one per row), legend, findings."""
    case = strip.case
    rows = list(layout_rows(case))
    ranks, steps = case.partition.dp, max(len(r) for r in case.partition.per_rank)
    per_sample = case.layout.kind.value != "packed"
    bands, findings = [], []
    for n, row in enumerate(rows):
        y = GEOMETRY["top"] + n * (GEOMETRY["row"] + GEOMETRY["gap"])
        band, finding = _band(strip, row, _row_label(row, ranks, steps, per_sample), y)
        bands.append(band)
        if finding:
            findings.append(finding)
    width = GEOMETRY["label"] + max(b["width"] for b in bands) + 8
    return {
        "arms": strip.arms, "what": strip.what, "failed": strip.failed, "threshold": format_number(strip.threshold),
        "layout": case.describe(), "cp": case.parallel.cp, "bands": bands, "geometry": GEOMETRY, "legend": LEGEND,
        "width": _px(width), "height": GEOMETRY["top"] + len(bands) * (GEOMETRY["row"] + GEOMETRY["gap"]),
        "summary": _summary(strip, findings, len(bands)),
        "findings": findings[:MAX_FINDINGS], "more_findings": max(0, len(findings) - MAX_FINDINGS),
    }
