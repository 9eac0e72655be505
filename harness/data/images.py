"""Multimodal samples for vision-language families: images put into the seeded text samples.

Sample i of a set gets i % 3 images (0, 1 or 2: text-only samples stay in every set and pack with
multimodal ones), as many as fit; its length never changes, so every scenario's packing geometry
(shard cuts, row fills) holds for the VLM family too. An image's placeholder run replaces text
tokens from position 1 on, one text token between two runs; placeholders get loss_mask 0, and a
text token that happens to equal the placeholder id is moved off it. Pixels are seeded normal
floats; grids cycle through shapes of 1, 2, 4 and 2 merged tokens (square, wide, tall).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from packcheck.harness.contract import Image, Sample, VisionSpec

GRIDS = ((1, 2, 2), (1, 2, 4), (1, 4, 4), (1, 4, 2))
IMAGES_PER_SAMPLE = (0, 1, 2)


def random_image(grid_thw: tuple[int, int, int], vision: VisionSpec, rng: random.Random) -> Image:
    t, h, w = grid_thw
    return Image(grid_thw=grid_thw, pixel_values=[rng.gauss(0.0, 1.0) for _ in range(t * h * w * vision.patch_dim)])


def place_images(sample: Sample, grids: Sequence[tuple[int, int, int]], vision: VisionSpec, seed: int) -> Sample:
    """`sample` with an image per grid that fits (runs from position 1 on, a text token between runs)."""
    rng = random.Random(seed)
    ids = [t if t != vision.image_token_id else (t + 1) % vision.image_token_id for t in sample.input_ids]
    mask = list(sample.loss_mask)
    images, start = [], 1
    for grid in grids:
        image = random_image(grid, vision, rng)
        length = image.num_tokens(vision.spatial_merge_size)
        if start + length > len(ids):
            break
        ids[start:start + length] = [vision.image_token_id] * length
        mask[start:start + length] = [0] * length
        images.append(image)
        start += length + 1
    return dataclasses.replace(sample, input_ids=tuple(ids), loss_mask=tuple(mask), images=tuple(images))


def with_images(samples: Sequence[Sample], vision: VisionSpec, seed: int, first: int = 0) -> tuple[Sample, ...]:
    """Sample i (counting from `first`) gets IMAGES_PER_SAMPLE[i % 3] images."""
    out = []
    for i, sample in enumerate(samples, start=first):
        count = IMAGES_PER_SAMPLE[i % len(IMAGES_PER_SAMPLE)]
        grids = [GRIDS[(i + k) % len(GRIDS)] for k in range(count)]
        out.append(place_images(sample, grids, vision, seed=seed * 7919 + i))
    return tuple(out)


def image_sample(length: int, grids: Sequence[tuple[int, int, int]], vision: VisionSpec, seed: int, vocab_size: int = 128) -> Sample:
    """One document of `length` tokens holding an image per grid (all targets but the placeholders)."""
    rng = random.Random(seed)
    base = Sample(input_ids=[rng.randrange(vocab_size) for _ in range(length)], loss_mask=[0] + [1] * (length - 1))
    return place_images(base, grids, vision, seed)
