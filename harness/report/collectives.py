"""Per-rank collective traces side by side, with the first divergence highlighted.

StepResult.collectives holds, per rank, the collectives the engine issued in order, each a dict
{op, group, shape, dtype, seq}. Every rank must issue the same sequence (op, group, shape, dtype);
where one rank issues something else, or nothing (it skipped a collective, e.g. a vision tower on
a text-only micro-batch), the others wait forever. The table shows a window around the first
index where the ranks disagree.
"""

from __future__ import annotations

from itertools import zip_longest

SIGNATURE = ("op", "group", "shape", "dtype")
BEFORE, AFTER = 4, 12  # rows shown around the first divergence
UNDIVERGED = 16  # rows shown when every rank agrees


def well_formed(per_rank: object) -> bool:
    """A list per rank of dicts: what this table can draw (the engine's result is not trusted here)."""
    return isinstance(per_rank, list) and all(isinstance(r, list) and all(isinstance(e, dict) for e in r) for r in per_rank)


def _signature(entry: dict | None) -> tuple | None:
    if entry is None:
        return None
    return tuple(tuple(entry.get(k) or ()) if k == "shape" else entry.get(k) for k in SIGNATURE)


def _text(entry: dict | None) -> str:
    if entry is None:
        return "(nothing: the rank issued no further collective)"
    shape = "x".join(str(n) for n in entry.get("shape") or ()) or "scalar"
    return f"#{entry.get('seq', '?')} {entry.get('op', '?')} [{entry.get('group', '?')}] {shape} {entry.get('dtype', '?')}"


def first_divergence(per_rank: list[list[dict]]) -> int | None:
    """The first index at which the ranks' collectives differ (or one has none left), else None."""
    for index, entries in enumerate(zip_longest(*per_rank)):
        if len({_signature(e) for e in entries}) > 1:
            return index
    return None


def collective_table(per_rank: list[list[dict]]) -> dict:
    """Template data: one column per rank, one row per collective index, the divergence marked."""
    first = first_divergence(per_rank)
    length = max((len(r) for r in per_rank), default=0)
    start, stop = (0, min(length, UNDIVERGED)) if first is None else (max(0, first - BEFORE), min(length, first + AFTER))
    rows = []
    for index in range(start, stop):
        entries = [r[index] if index < len(r) else None for r in per_rank]
        reference = _signature(entries[0])
        rows.append({
            "index": index,
            "state": "same" if first is None or index < first else "first" if index == first else "after",
            "cells": [{"text": _text(e), "odd": first is not None and index >= first and _signature(e) != reference} for e in entries],
        })
    if first is None:
        summary = f"Every rank issued the same {length} collectives in the same order."
    else:
        texts = ", ".join(f"rank {r}: {_text(entries)}" for r, entries in
                          enumerate(r[first] if first < len(r) else None for r in per_rank))
        summary = f"The ranks diverge at collective #{first}: {texts}."
    return {
        "ranks": list(range(len(per_rank))), "counts": [len(r) for r in per_rank], "rows": rows, "first": first,
        "summary": summary, "hidden_before": start, "hidden_after": length - stop,
    }
