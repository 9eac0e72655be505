"""The packing the Layout contract prescribes, computed by the harness for its own bookkeeping.

The harness never hands rows to an engine; it uses this to know how many rows a packed layout
has, which documents share a row, and to describe a token's place ("document 2 of row 0") in
failure messages.
"""

from __future__ import annotations

from typing import Sequence

from harness.contract import Case, LayoutKind


def pack_in_order(lengths: Sequence[int], seq_len: int) -> list[list[int]]:
    """Sample indices per row: in order, a sample that does not fit starts the next row."""
    rows: list[list[int]] = []
    used = seq_len
    for index, length in enumerate(lengths):
        if length > seq_len:
            raise ValueError(f"sample {index} has {length} tokens > seq_len {seq_len}")
        if used + length > seq_len:
            rows.append([])
            used = 0
        rows[-1].append(index)
        used += length
    return rows


def describe_token(case: Case, sample: int, token: int) -> str:
    """Where a token sits in the case's layout, in words."""
    base = f"sample {sample} token {token}"
    if token == 1:
        base += " (its first target)"
    if case.layout.kind is not LayoutKind.PACKED:
        return base
    for micro_batch in (mb for rank in case.partition.per_rank for mb in rank):
        if sample not in micro_batch:
            continue
        rows = pack_in_order([len(case.samples[i].input_ids) for i in micro_batch], case.layout.seq_len)
        for row_index, row in enumerate(rows):
            positions = [micro_batch[j] for j in row]
            if sample in positions:
                doc = positions.index(sample)
                return f"{base}, document {doc + 1} of {len(positions)} in packed row {row_index}"
    return base
