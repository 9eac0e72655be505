"""The "where it parts" section of a failing verdict's card: its localisation (harness/run/localisations.py) as a
per-point error trail, forward order first (the first divergent module marked), then the backward trail.

Numbers only: the template (templates/where_it_parts.html.j2) draws them, autoescaped like the rest of the report.
"""

from __future__ import annotations

import math

from packcheck.harness.compare.divergence import Divergence, PointError, Where
from packcheck.harness.report.load import format_number

BAR = 150  # px: a row's bar, log scale from FLOOR to the largest error shown
FLOOR = 1e-17  # an exact zero draws no bar


def _rows(trail: tuple[PointError, ...], first: int | None, threshold: float) -> list[dict]:
    top = max([p.error for p in trail if math.isfinite(p.error)] + [threshold if math.isfinite(threshold) else 1.0, 1.0])
    span = math.log10(top) - math.log10(FLOOR)

    def x(value: float) -> float:
        if not math.isfinite(value):
            return float(BAR)
        return 0.0 if value <= FLOOR else round((math.log10(value) - math.log10(FLOOR)) / span * BAR, 1)

    return [{"index": i, "label": p.label, "module": p.module, "error": format_number(p.error), "over": not p.error <= threshold,
             "first": i == first, "width": max(x(p.error), 0.0), "tick": x(threshold),
             "where": f"sample {p.worst_sample} token {p.worst_token}" if p.error else ""}
            for i, p in enumerate(trail)]


def where_it_parts(divergence: Divergence | None) -> dict | None:
    """The section's data, or None where the verdict was not localised."""
    if divergence is None:
        return None
    forward_first = divergence.first if divergence.where is Where.FORWARD else None
    backward_first = divergence.first if divergence.where in (Where.LOSS, Where.BACKWARD) else None
    return {
        "where": divergence.where.value, "sentence": divergence.sentence(), "arm": divergence.arm, "against": divergence.against,
        "tokens": divergence.tokens, "threshold": format_number(divergence.threshold), "seconds": divergence.seconds,
        "bound": "" if divergence.bound is None else f"{divergence.bound.field} ({divergence.bound.source.value})",
        "bar": BAR, "floor": f"{FLOOR:.0e}",
        "forward": _rows(divergence.forward, forward_first, divergence.threshold),
        "backward": _rows(divergence.backward, backward_first, divergence.threshold),
        "backward_open": backward_first is not None,
    }


def parts_line(localised: dict[tuple, Divergence], key: tuple) -> str:
    """The localisation of the verdict `key` in one line ("" where it was not localised): the Markdown summary and
    the JUnit message carry it, as the console does."""
    divergence = localised.get(tuple(map(str, key)))
    return "" if divergence is None else f"where it parts: {divergence.sentence()}"
