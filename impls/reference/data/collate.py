"""The padded batch a data loader hands a trainer, and unpadding it back into documents.

Most engines receive a padded batch (input_ids, loss_mask, attention_mask of shape [B, L]) and
unpad it before packing; this file mirrors that step, because the mask slicing in it is where
real bugs live (BUGS.md: mask-slice-misalign).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from packcheck.harness.contract import Sample

PAD_ID = 0


@dataclass(frozen=True, slots=True)
class PaddedBatch:
    input_ids_BL: torch.Tensor
    loss_mask_BL: torch.Tensor
    attention_mask_BL: torch.Tensor
    padding_side: str


@dataclass(frozen=True, slots=True)
class Document:
    """One sample, unpadded: where it came from, its tokens and its loss mask."""

    sample: int
    input_ids: torch.Tensor
    loss_mask: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.numel()


def pad_batch(samples: Sequence[Sample], padding_side: str) -> PaddedBatch:
    width = max(len(s.input_ids) for s in samples)
    ids = torch.full((len(samples), width), PAD_ID, dtype=torch.long)
    mask = torch.zeros((len(samples), width), dtype=torch.long)
    valid = torch.zeros((len(samples), width), dtype=torch.long)
    for b, sample in enumerate(samples):
        n = len(sample.input_ids)
        span = slice(width - n, width) if padding_side == "left" else slice(0, n)
        ids[b, span] = torch.tensor(sample.input_ids)
        mask[b, span] = torch.tensor(sample.loss_mask)
        valid[b, span] = 1
    return PaddedBatch(ids, mask, valid, padding_side)


def unpad_mask(row_mask_L: torch.Tensor, row_valid_L: torch.Tensor) -> torch.Tensor:
    """The loss mask of a row's valid tokens, in order."""
    return row_mask_L[row_valid_L.bool()]


UnpadMask = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def unpad(batch: PaddedBatch, sample_ids: Sequence[int], unpad_mask: UnpadMask = unpad_mask) -> list[Document]:
    documents = []
    for b, sample in enumerate(sample_ids):
        valid = batch.attention_mask_BL[b].bool()
        documents.append(Document(sample, batch.input_ids_BL[b][valid], unpad_mask(batch.loss_mask_BL[b], batch.attention_mask_BL[b])))
    return documents
