"""Rows re-aligned to what each position predicts, and cut into context-parallel shards.

Position p of a row predicts the token at p + 1, so its label, its loss mask and the (sample,
token) it speaks for are those of p + 1; the row's last position predicts nothing. Shifting the
labels on the whole row *before* sharding is what lets a shard's last position predict the first
token of the next shard (the shard cut is not a document boundary).

A vision-language forward also carries `image_index_BT` (which image feature replaces each
placeholder's embedding, -1 for text), sharded like the rest, and `images` (the forward's pixels
and grids), which every shard keeps whole: each context-parallel rank encodes every image of its
micro-batch. Its `position_ids_BT` are then MRoPE positions [B, T, 3] (impls/reference/data/vision_rows.py).

Shapes: B rows, T tokens (a shard's T is the row's T / cp).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from packcheck.impls.reference.data.vision_inputs import ForwardImages

from packcheck.impls.reference.data.rows import Rows


@dataclass(frozen=True, slots=True)
class Predictions:
    input_ids_BT: torch.Tensor
    position_ids_BT: torch.Tensor
    segment_ids_BT: torch.Tensor
    label_BT: torch.Tensor
    label_mask_BT: torch.Tensor
    label_sample_BT: torch.Tensor
    label_token_BT: torch.Tensor
    sample_BT: torch.Tensor  # which sample each position holds (-1 padding): which samples this forward saw
    image_index_BT: torch.Tensor | None = None  # vision-language only: the image feature of each placeholder, -1 for text
    images: ForwardImages | None = None  # vision-language only: this forward's images, whole on every shard
    token_BT: torch.Tensor | None = None  # which token of its sample each position holds (-1 padding): where a capture puts it

    @classmethod
    def from_rows(cls, rows: Rows) -> Predictions:
        def next_of(x_BT: torch.Tensor, fill: int) -> torch.Tensor:
            return torch.cat([x_BT[:, 1:], torch.full_like(x_BT[:, :1], fill)], dim=1)

        return cls(
            input_ids_BT=rows.input_ids_BT,
            position_ids_BT=rows.position_ids_BT,
            segment_ids_BT=rows.segment_ids_BT,
            label_BT=next_of(rows.input_ids_BT, 0),
            label_mask_BT=next_of(rows.target_mask_BT, 0),
            label_sample_BT=next_of(rows.sample_BT, -1),
            label_token_BT=next_of(rows.token_BT, -1),
            sample_BT=rows.sample_BT,
            token_BT=rows.token_BT,
        )

    def shard(self, index: int, count: int) -> Predictions:
        """The index-th of `count` contiguous shards along T (uneven if T is not divisible)."""
        def part(value):
            return torch.tensor_split(value, count, dim=1)[index] if isinstance(value, torch.Tensor) else value

        return Predictions(**{f.name: part(getattr(self, f.name)) for f in fields(self)})

    def to(self, device) -> Predictions:
        return Predictions(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name).to(device) for f in fields(self)})


def label_logprobs(logits_BTV: torch.Tensor, label_BT: torch.Tensor) -> torch.Tensor:
    """log p(label | prefix) at every position: [B, T]."""
    return torch.log_softmax(logits_BTV, dim=-1).gather(-1, label_BT[..., None]).squeeze(-1)
