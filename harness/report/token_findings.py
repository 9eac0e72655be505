"""Where a token strip's error sits, in words.

Per row: where the error starts, at a document boundary (a cross-document leak leaves the row's
first document exact and starts at the first target after a boundary), at a CP shard cut (a
shard-local bug), or inside a document. Per strip: whether the tokens right after boundaries
carry errors far above every other token's (a label or a loss weight that crosses the boundary,
with a small error everywhere else from the changed token count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from packcheck.harness.contract.rows import Row
from packcheck.harness.report.token_errors import TokenErrors

PEAK = 5.0  # a token right after a boundary is a peak if its error is this many times any other token's


@dataclass(frozen=True, slots=True)
class PlacedRow:
    label: str
    row: Row
    starts: list[int]  # row position of each document's token 0
    cuts: list[int]  # row positions where CP shards begin


class Start(Enum):
    """Where a row's first error out of tolerance sits."""

    BOUNDARY = "at a document boundary"
    CP_CUT = "at a CP shard cut"
    INSIDE = "inside a document"


@dataclass(frozen=True, slots=True)
class RowFinding:
    start: Start
    text: str  # for people: the row, the position, the sample and token


def is_bad(error: float | None, threshold: float) -> bool:
    return error is not None and (math.isnan(error) or error > threshold)


def _at_boundary(document: int, token: int) -> bool:
    return document > 0 and token <= 1


def row_finding(strip: TokenErrors, placed: PlacedRow) -> RowFinding | None:
    """Where the error starts in this row; None when the row is within tolerance."""
    count = len(placed.starts)
    for d, (i, start) in enumerate(zip(placed.row.samples, placed.starts)):
        t = next((t for t, e in enumerate(strip.errors[i] or []) if is_bad(e, strip.threshold)), None)
        if t is None:
            continue
        where = f"{placed.label}: starts at position {start + t}, sample {i} token {t}"
        if _at_boundary(d, t):
            return RowFinding(Start.BOUNDARY, f"{where}, the {'first token' if t == 0 else 'first target'} of document {d + 1} of "
                                              f"{count}: {Start.BOUNDARY.value}")
        if any(abs(start + t - cut) <= 1 for cut in placed.cuts):
            return RowFinding(Start.CP_CUT, f"{where}: {Start.CP_CUT.value}")
        return RowFinding(Start.INSIDE, f"{where}, inside document {d + 1} of {count}")
    return None


def _boundary_peaks(strip: TokenErrors, rows: list[PlacedRow]) -> int:
    """How many tokens right after a boundary carry errors PEAK times larger than any other token's."""
    at_boundary, elsewhere = [], [0.0]
    for placed in rows:
        for d, i in enumerate(placed.row.samples):
            for t, e in enumerate(strip.errors[i] or []):
                if is_bad(e, strip.threshold):
                    (at_boundary if _at_boundary(d, t) else elsewhere).append(math.inf if math.isnan(e) else e)
    return sum(e >= PEAK * max(elsewhere) for e in at_boundary)


def summarise(strip: TokenErrors, rows: list[PlacedRow]) -> tuple[str, list[str]]:
    """A sentence for the strip, and one finding per row out of tolerance."""
    findings = [f for f in (row_finding(strip, placed) for placed in rows) if f]
    if not findings:
        return f"Every token within tolerance ({len(rows)} rows).", []
    at_boundary = sum(f.start is Start.BOUNDARY for f in findings)
    text = f"{len(findings)} of {len(rows)} rows out of tolerance"
    if at_boundary == len(findings):
        text += ("; in every one the error starts at a document boundary and the row's first document is exact: "
                 "information crosses documents")
    elif at_boundary:
        text += f"; in {at_boundary} the error starts at a document boundary"
    at_cut = sum(f.start is Start.CP_CUT for f in findings)
    if at_cut == len(findings):
        text += "; in every one the error starts at a CP shard cut: something is computed per shard (boundaries, positions, carried state)"
    elif at_cut:
        text += f"; in {at_cut} the error starts at a CP shard cut"
    peaks = _boundary_peaks(strip, rows)
    if peaks:
        text += (f"; the largest errors sit right after boundaries ({peaks} tokens, each {PEAK:g}x or more above any other "
                 "token's): a label or a loss weight crosses the boundary")
    return text + ".", [f.text for f in findings]
