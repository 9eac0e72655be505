"""The vision tower's run in a training step: once per micro-batch, on every rank.

Every rank encodes every micro-batch's images before its forwards, and a micro-batch without
any image encodes a dummy one (black pixels, the smallest grid), whose features enter the
forwards only multiplied by exactly zero (model/vlm.py): the loss and gradients are the text's,
and the tower's collectives (its FSDP all-gathers under data parallelism) are issued the same
number of times on every rank. A rank that skipped the tower on text-only micro-batches would
leave the others waiting in the tower's all-gather (BUGS.md: vision-skip-hang).

The tower is frozen: it runs without autograd, once per micro-batch, and each forward of the
micro-batch takes its own images' features (or, with none, the micro-batch's, times zero).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.data.vision_inputs import ForwardImages


def dummy_image(patch_dim: int, spatial_merge_size: int, dtype: torch.dtype) -> ForwardImages:
    grid = (1, spatial_merge_size, spatial_merge_size)
    return ForwardImages(torch.zeros(spatial_merge_size**2, patch_dim, dtype=dtype), (grid,), 1)


def encode_micro_batch(model: nn.Module, forwards: Sequence[Predictions]) -> list[torch.Tensor | None]:
    """The image features each forward of one micro-batch takes; None for a text-only model."""
    if not hasattr(model, "encode_images"):
        return [None] * len(forwards)
    parts = [p.images for p in forwards]
    images = ForwardImages.concat(parts)
    if images.num_tokens == 0:
        vision = model.config.vision
        images = dummy_image(vision.patch_dim, vision.spatial_merge_size, images.pixels_PF.dtype)
    device = next(model.parameters()).device
    with torch.no_grad():
        features_NC = model.encode_images(images.pixels_PF.to(device), list(images.grids_thw))
    per_forward, offset = [], 0
    for part in parts:
        per_forward.append(features_NC[offset:offset + part.num_tokens] if part.num_tokens else features_NC)
        offset += part.num_tokens
    return per_forward

