"""The rows a Layout prescribes: the packing geometry the engines, the harness and the report share.

Packed: rows of exactly seq_len, documents in order, padding at the end; unpacked: one sample per
row, padded to the longest sample of its micro-batch; stacked: one sample per row, padded to the
longest of its length bucket. An engine may build its rows with `layout_rows` (the worked
example does) or its own way; the harness uses it to know which documents share a row and where
each token sits (reports draw rows token by token), and to describe a token's place ("document 2
of row 0") in failure messages.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from math import ceil
from typing import Iterator, Sequence

from packcheck.harness.contract.case import Case
from packcheck.harness.contract.layout import LayoutKind


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One row of one forward: its documents (sample indices, in row order) and its width in tokens."""

    rank: int
    step: int  # micro-step
    index: int  # row within the micro-batch
    samples: tuple[int, ...]
    width: int
    padding_side: str = "right"

    def starts(self, case: Case) -> list[int]:
        """The row position of each document's token 0 (padding takes its side of the row)."""
        lengths = [len(case.samples[i].input_ids) for i in self.samples]
        position = self.width - sum(lengths) if self.padding_side == "left" else 0
        starts = []
        for length in lengths:
            starts.append(position)
            position += length
        return starts


def layout_rows(case: Case) -> Iterator[Row]:
    """Every row the case's layout prescribes, micro-batch by micro-batch (under a token budget, those of the
    in-order cut: Case.micro_batches_by_rank).

    packed: rows of exactly seq_len, documents in order, padding at the end; unpacked: one sample
    per row, padded to the longest sample of its micro-batch; stacked: one sample per row, padded
    to the longest sample of its length bucket.
    """
    layout = case.layout
    for rank, steps in enumerate(case.micro_batches_by_rank):
        for step, micro_batch in enumerate(steps):
            lengths = [len(case.samples[i].input_ids) for i in micro_batch]
            if layout.kind is LayoutKind.PACKED:
                groups = [([micro_batch[j] for j in row], layout.seq_len) for row in pack_in_order(lengths, layout.seq_len)]
                side = "right"
            else:
                buckets: dict[int, list[int]] = defaultdict(list)
                for i, length in zip(micro_batch, lengths):
                    key = 0 if layout.kind is LayoutKind.UNPACKED else ceil(length / layout.bucket_width)
                    buckets[key].append(i)
                groups = [([i], max(len(case.samples[j].input_ids) for j in buckets[key])) for key in sorted(buckets) for i in buckets[key]]
                side = layout.padding_side
            for index, (samples, width) in enumerate(groups):
                yield Row(rank=rank, step=step, index=index, samples=tuple(samples), width=width, padding_side=side)


def describe_token(case: Case, sample: int, token: int) -> str:
    """Where a token sits in the case's layout, in words."""
    base = f"sample {sample} token {token}"
    if token == 1:
        base += " (its first target)"
    if case.layout.kind is not LayoutKind.PACKED:
        return base
    for row in layout_rows(case):
        if sample in row.samples:
            return f"{base}, document {row.samples.index(sample) + 1} of {len(row.samples)} in packed row {row.index}"
    return base
