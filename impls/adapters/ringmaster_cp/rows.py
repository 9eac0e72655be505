"""The Case's layout as the rows a Hugging Face trainer hands to ringmaster: token ids, position
ids that restart at every document (and at the padding, its own segment), unshifted HF `labels`,
and per-position bookkeeping that travels through ringmaster's own sharding.

ringmaster (like transformers' packed-sequence detection) reads document boundaries from
`position_ids` resets, so every layout becomes rows of segments: packed rows hold several
documents, unpacked and stacked rows one document plus a padding segment on `padding_side`.

Shapes: B rows, T the row width.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

import torch

from packcheck.harness.contract import Case, LayoutKind

IGNORE = -100  # the label HF and ringmaster skip


@dataclass(frozen=True, slots=True)
class Forward:
    """One forward's rows, global (before any context-parallel shard)."""

    input_ids_BT: torch.Tensor
    position_ids_BT: torch.Tensor
    labels_BT: torch.Tensor  # HF convention: labels[t] = the target token t (unshifted); IGNORE if not in the loss
    target_ids_BT: torch.Tensor  # input_ids[t + 1] within the row (0 at the last position): what position t predicts
    dest_BT: torch.Tensor  # 1 + flat (sample, token) index of token t + 1 when it is in the same document, else 0

    def segments_per_row(self) -> list[int]:
        return [int((row == 0).sum()) for row in self.position_ids_BT]


def row_groups(case: Case, micro_batch: tuple[int, ...]) -> list[tuple[list[int], int, str]]:
    """(documents, width, padding side) of every row, grouped into forwards: a list per forward."""
    layout = case.layout
    lengths = {i: len(case.samples[i].input_ids) for i in micro_batch}
    if layout.kind is LayoutKind.PACKED:
        rows: list[list[int]] = []
        free = 0
        for i in micro_batch:
            if lengths[i] > free:
                rows.append([])
                free = layout.seq_len
            rows[-1].append(i)
            free -= lengths[i]
        return [[(row, layout.seq_len, "right") for row in rows]]
    if layout.kind is LayoutKind.UNPACKED:
        width = max(lengths.values())
        return [[([i], width, layout.padding_side) for i in micro_batch]]
    buckets: dict[int, list[int]] = {}
    for i in micro_batch:
        buckets.setdefault(ceil(lengths[i] / layout.bucket_width), []).append(i)
    forwards = []
    for key in sorted(buckets):
        width = max(lengths[i] for i in buckets[key])
        forwards.append([([i], width, layout.padding_side) for i in buckets[key]])
    return forwards


def build_forwards(case: Case, micro_batch: tuple[int, ...]) -> list[Forward]:
    offsets = [0]
    for sample in case.samples:
        offsets.append(offsets[-1] + len(sample.input_ids))
    forwards = []
    for rows in row_groups(case, micro_batch):
        B, T = len(rows), rows[0][1]
        ids, pos, labels, targets, dest = (torch.zeros(B, T, dtype=torch.long) for _ in range(5))
        labels.fill_(IGNORE)
        for b, (documents, width, side) in enumerate(rows):
            used = sum(len(case.samples[i].input_ids) for i in documents)
            cursor = width - used if side == "left" else 0
            if width > used:  # the padding: its own segment, positions restarting at 0
                pad = slice(0, width - used) if side == "left" else slice(used, width)
                pos[b, pad] = torch.arange(width - used)
            for i in documents:
                sample = case.samples[i]
                n = len(sample.input_ids)
                span = slice(cursor, cursor + n)
                ids[b, span] = torch.tensor(sample.input_ids)
                pos[b, span] = torch.arange(n)
                mask = torch.tensor(sample.loss_mask, dtype=torch.bool)
                labels[b, span] = torch.where(mask, ids[b, span], IGNORE)
                # position p predicts token p + 1 of the same document
                dest[b, cursor:cursor + n - 1] = 1 + offsets[i] + torch.arange(1, n)
                cursor += n
            targets[b, :-1] = ids[b, 1:]
        forwards.append(Forward(ids, pos, labels, targets, dest))
    return forwards


def shift_labels(labels_BT: torch.Tensor) -> torch.Tensor:
    """HF's causal shift over the whole row: position t is trained on labels[t + 1]."""
    shifted = torch.full_like(labels_BT, IGNORE)
    shifted[:, :-1] = labels_BT[:, 1:]
    return shifted
