"""Rows: the tensors one forward pass sees, built from row plans (documents + a padding segment).

Every layout becomes rows of segments: each document is a segment, padding is a segment of its
own (so no query is ever fully masked), positions restart at 0 in every segment, and a token is a
loss target iff its document's loss mask says so. `sample_BT` / `token_BT` map every position
back to (sample, token) so results can be reported in the original sample order.

Shapes: B rows, T tokens per row.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import torch

from packcheck.impls.reference.data.collate import PAD_ID, Document


@dataclass(frozen=True, slots=True)
class RowPlan:
    documents: tuple[Document, ...]
    width: int
    padding_side: str = "right"

    @property
    def pad(self) -> int:
        return self.width - sum(len(d) for d in self.documents)

    def segments(self) -> list[Document | int]:
        """Documents and the padding length, in row order."""
        pad = [self.pad] if self.pad else []
        return [*pad, *self.documents] if self.padding_side == "left" else [*self.documents, *pad]


@dataclass(frozen=True, slots=True)
class Rows:
    input_ids_BT: torch.Tensor
    position_ids_BT: torch.Tensor
    segment_ids_BT: torch.Tensor
    target_mask_BT: torch.Tensor
    sample_BT: torch.Tensor
    token_BT: torch.Tensor


def positions_and_segments(segment_lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    """Positions restart at 0 in every segment; each segment gets its own id."""
    positions, segments = [], []
    for index, length in enumerate(segment_lengths):
        positions += range(length)
        segments += [index] * length
    return positions, segments


def segment_ids(starts: Iterable[bool]) -> list[int]:
    """Each token's segment id, from whether each token starts a segment (the way engines read documents off position
    ids: the mutants that model them say which positions start one)."""
    return [count - 1 for count in itertools.accumulate(int(start) for start in starts)]


def target_mask(plan: RowPlan) -> list[int]:
    """1 where the token is a loss target: its document's loss mask; never padding."""
    mask: list[int] = []
    for segment in plan.segments():
        mask += segment.loss_mask.tolist() if isinstance(segment, Document) else [0] * segment
    return mask


PositionsAndSegments = Callable[[Sequence[int]], tuple[list[int], list[int]]]
TargetMask = Callable[[RowPlan], list[int]]


def build_rows(plans: Sequence[RowPlan], positions_fn: PositionsAndSegments = positions_and_segments,
               target_fn: TargetMask = target_mask) -> Rows:
    ids, positions, segments, targets, samples, tokens = [], [], [], [], [], []
    for plan in plans:
        row_ids, row_samples, row_tokens, lengths = [], [], [], []
        for segment in plan.segments():
            if isinstance(segment, Document):
                row_ids += segment.input_ids.tolist()
                row_samples += [segment.sample] * len(segment)
                row_tokens += range(len(segment))
                lengths.append(len(segment))
            else:
                row_ids += [PAD_ID] * segment
                row_samples += [-1] * segment
                row_tokens += [-1] * segment
                lengths.append(segment)
        row_positions, row_segments = positions_fn(lengths)
        ids.append(row_ids)
        positions.append(row_positions)
        segments.append(row_segments)
        targets.append(target_fn(plan))
        samples.append(row_samples)
        tokens.append(row_tokens)
    as_long = lambda rows: torch.tensor(rows, dtype=torch.long)  # noqa: E731
    return Rows(as_long(ids), as_long(positions), as_long(segments), as_long(targets), as_long(samples), as_long(tokens))
