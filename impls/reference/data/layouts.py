"""Turn one micro-batch of a Case into the forwards the reference runs, per the Layout contract.

- unpacked: one forward over the padded batch itself (one document per row);
- packed: unpad, pack into rows of seq_len, one forward;
- stacked: unpad, bucket by ceil(len / bucket_width), one forward per bucket.

Under context parallelism every row is widened by `padded_width` (padding is its own segment)
so that it splits into equal shards.

An empty micro-batch (a token budget's equalisation: harness/contract/token_budget.py) is one
forward of one row of padding only: no target, no sample, no image, so everything it backpropagates
is multiplied by its all-zero loss mask, while its forward issues every collective a forward does.
"""

from __future__ import annotations

from collections import defaultdict
from math import ceil
from typing import Callable, Sequence

from packcheck.harness.contract import Case, LayoutKind
from packcheck.impls.reference.data.collate import UnpadMask, pad_batch, unpad
from packcheck.impls.reference.data.rows import RowPlan

PackRows = Callable[[Sequence[int], int], list[list[int]]]
PaddedWidth = Callable[[int, int], int]


def padded_width(width: int, cp: int) -> int:
    """The row width rounded up to a multiple of cp, so every shard has the same length."""
    return -(-width // cp) * cp


def plan_forwards(case: Case, micro_batch: Sequence[int], pack_rows: PackRows, unpad_mask: UnpadMask,
                  widen: PaddedWidth = padded_width) -> list[list[RowPlan]]:
    layout, cp = case.layout, case.parallel.cp
    batch = pad_batch([case.samples[i] for i in micro_batch], layout.padding_side)
    if layout.kind is LayoutKind.UNPACKED:
        width = widen(batch.input_ids_BL.shape[1], cp)
        return [[RowPlan((doc,), width, layout.padding_side) for doc in unpad(batch, micro_batch)]]
    documents = unpad(batch, micro_batch, unpad_mask)
    if layout.kind is LayoutKind.PACKED:
        rows = pack_rows([len(d) for d in documents], layout.seq_len)
        return [[RowPlan(tuple(documents[j] for j in row), widen(layout.seq_len, cp)) for row in rows]]
    buckets = defaultdict(list)
    for doc in documents:
        buckets[ceil(len(doc) / layout.bucket_width)].append(doc)
    forwards = []
    for key in sorted(buckets):
        width = widen(max(len(d) for d in buckets[key]), cp)
        forwards.append([RowPlan((doc,), width, layout.padding_side) for doc in buckets[key]])
    return forwards


def empty_forwards(case: Case, widen: PaddedWidth = padded_width) -> list[list[RowPlan]]:
    """The forwards of an empty micro-batch: one row of padding, as narrow as its cp shards allow."""
    return [[RowPlan((), widen(1, case.parallel.cp))]]
