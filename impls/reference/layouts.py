"""Turn one micro-batch of a Case into the forwards the reference runs, per the Layout contract.

- unpacked: one forward over the padded batch itself (one document per row);
- packed: unpad, pack into rows of seq_len, one forward;
- stacked: unpad, bucket by ceil(len / bucket_width), one forward per bucket.
"""

from __future__ import annotations

from collections import defaultdict
from math import ceil
from typing import Callable, Sequence

from harness.contract import Case, LayoutKind
from impls.reference.collate import UnpadMask, pad_batch, unpad
from impls.reference.rows import RowPlan

PackRows = Callable[[Sequence[int], int], list[list[int]]]


def plan_forwards(case: Case, micro_batch: Sequence[int], pack_rows: PackRows, unpad_mask: UnpadMask) -> list[list[RowPlan]]:
    layout = case.layout
    batch = pad_batch([case.samples[i] for i in micro_batch], layout.padding_side)
    if layout.kind is LayoutKind.UNPACKED:
        width = batch.input_ids_BL.shape[1]
        return [[RowPlan((doc,), width, layout.padding_side) for doc in unpad(batch, micro_batch)]]
    documents = unpad(batch, micro_batch, unpad_mask)
    if layout.kind is LayoutKind.PACKED:
        rows = pack_rows([len(d) for d in documents], layout.seq_len)
        return [[RowPlan(tuple(documents[j] for j in row), layout.seq_len) for row in rows]]
    buckets = defaultdict(list)
    for doc in documents:
        buckets[ceil(len(doc) / layout.bucket_width)].append(doc)
    forwards = []
    for key in sorted(buckets):
        width = max(len(d) for d in buckets[key])
        forwards.append([RowPlan((doc,), width, layout.padding_side) for doc in buckets[key]])
    return forwards
