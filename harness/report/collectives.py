"""Per-rank collective traces side by side, where the ranks stop matching.

StepResult.collectives holds each rank's log from the collective recorder (packcheck.harness.collectives):
one entry per torch.distributed call with its op, group (global ranks), tensors, arguments, state
and call site. Symmetry is per process group (packcheck.harness.collectives.symmetry): the k-th collective
each member issues on a group must match the others'. The table shows the group that diverges
first, one column per member, one row per collective on that group, a window around the first
divergence; a member with nothing left (it skipped a collective the others wait in) reads so.
"""

from __future__ import annotations

from packcheck.harness.collectives import divergence, first_divergence, group_sequences, signature

ENTRY_KEYS = ("seq", "op", "group", "tensors")  # what the symmetry check reads of each entry
BEFORE, AFTER = 4, 12  # rows shown around the first divergence


def well_formed(logs: object) -> bool:
    """A list per rank of recorder entries: what this table can draw (the engine's result is not trusted here)."""
    return isinstance(logs, list) and all(
        isinstance(log, list) and all(isinstance(e, dict) and all(k in e for k in ENTRY_KEYS) for e in log) for log in logs)


def _text(entry: dict | None) -> str:
    if entry is None:
        return "(nothing: the rank issued no further collective on this group)"
    tensors = ", ".join(f"{t['arg']}: {t['dtype']}{t['shape']}" for t in entry["tensors"])
    args = "".join(f", {k}={v}" for k, v in entry.get("args", {}).items())
    return f"#{entry['seq']} {entry['op']}({tensors}{args}) {entry.get('state', '')}".rstrip()


def collective_table(logs: list[list[dict]]) -> dict | None:
    """Template data for the diverging group; None when every group's members match."""
    where = divergence(logs)
    if where is None:
        return None
    group, first = where
    members = group_sequences(logs)[group]
    ranks = sorted(members)
    length = max(len(members[r]) for r in ranks)
    start, stop = max(0, first - BEFORE), min(length, first + AFTER)
    rows = []
    for k in range(start, stop):
        entries = [members[r][k] if k < len(members[r]) else None for r in ranks]
        reference = None if entries[0] is None else signature(entries[0])
        rows.append({
            "index": k, "state": "same" if k < first else "first" if k == first else "after",
            "cells": [{"text": _text(e), "odd": k >= first and (e is None or signature(e) != reference)} for e in entries],
        })
    return {
        "group": list(group), "ranks": ranks, "counts": [len(members[r]) for r in ranks], "rows": rows, "first": first,
        "summary": first_divergence(logs), "hidden_before": start, "hidden_after": length - stop,
    }
