"""Image inputs of a vision-language sample, and how they sit in its tokens.

An image travels as what a Qwen2.5-VL-style vision tower consumes, so no engine needs an image
processor: `grid_thw = (t, h, w)` patches (frames x rows x columns) and `pixel_values`, the
t*h*w patches flattened row-major, each a row of `patch_dim = in_channels * temporal_patch_size *
patch_size**2` floats, in the order transformers' Qwen2-VL image processor emits them (every
spatial_merge_size x spatial_merge_size block of patches contiguous). JSON floats, never pickle.

In `input_ids`, image k is one contiguous run of the model's image placeholder token
(`image_token_id`), of exactly t*h*w / spatial_merge_size**2 tokens: the tower's merged features
replace those embeddings. Runs and images pair up in order, so two images need at least one text
token between their runs. Placeholders are inputs, never loss targets: their loss_mask is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from packcheck.harness.contract.errors import ContractError


@dataclass(frozen=True, kw_only=True, slots=True)
class Image:
    grid_thw: tuple[int, int, int]
    pixel_values: tuple[float, ...]  # t*h*w patches x patch_dim, row-major

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid_thw", tuple(int(n) for n in self.grid_thw))
        object.__setattr__(self, "pixel_values", tuple(float(v) for v in self.pixel_values))

    @property
    def num_patches(self) -> int:
        return math.prod(self.grid_thw)

    def num_tokens(self, spatial_merge_size: int) -> int:
        """Placeholder tokens this image fills: one per merged block of patches."""
        return self.num_patches // spatial_merge_size**2

    def to_json(self) -> dict:
        return {"grid_thw": list(self.grid_thw), "pixel_values": list(self.pixel_values)}

    @classmethod
    def from_json(cls, data: dict) -> Image:
        return cls(**data)


@dataclass(frozen=True, kw_only=True, slots=True)
class VisionSpec:
    """What the harness needs of a model's vision config to check image samples."""

    image_token_id: int
    spatial_merge_size: int
    patch_dim: int

    @classmethod
    def from_config(cls, config: dict) -> VisionSpec | None:
        """From a Hugging Face VLM config (`vision_config` nested); None for a text-only model."""
        vision = config.get("vision_config")
        if vision is None:
            return None
        return cls(
            image_token_id=int(config["image_token_id"]),
            spatial_merge_size=int(vision.get("spatial_merge_size", 2)),
            patch_dim=int(vision.get("in_channels", 3)) * int(vision.get("temporal_patch_size", 2)) * int(vision.get("patch_size", 14)) ** 2,
        )


def placeholder_runs(input_ids: tuple[int, ...], token_id: int) -> list[tuple[int, int]]:
    """(start, length) of every maximal run of `token_id`, in order."""
    runs: list[tuple[int, int]] = []
    for t, token in enumerate(input_ids):
        if token != token_id:
            continue
        if runs and runs[-1][0] + runs[-1][1] == t:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((t, 1))
    return runs


def check_images(where: str, input_ids: tuple[int, ...], loss_mask: tuple[int, ...], images: tuple[Image, ...],
                 vision: VisionSpec | None) -> None:
    """Raise ContractError naming the field and the fix if the images and placeholders disagree."""
    if vision is None:
        if images:
            raise ContractError(f"{where}.images has {len(images)} images but the model has no vision tower: "
                                "drop the images or use a vision-language family")
        return
    runs = placeholder_runs(input_ids, vision.image_token_id)
    if len(runs) != len(images):
        raise ContractError(
            f"{where}.input_ids has {len(runs)} runs of the image placeholder token {vision.image_token_id} but {where}.images "
            f"has {len(images)} images: give each image exactly one run of placeholders (separate consecutive images by a text token)"
        )
    merge = vision.spatial_merge_size
    for k, (image, (start, length)) in enumerate(zip(images, runs)):
        t, h, w = image.grid_thw
        if min(t, h, w) < 1 or h % merge or w % merge:
            raise ContractError(f"{where}.images[{k}].grid_thw = {image.grid_thw}: t, h, w must be positive and h, w multiples "
                                f"of spatial_merge_size={merge}")
        expected = image.num_patches * vision.patch_dim
        if len(image.pixel_values) != expected:
            raise ContractError(f"{where}.images[{k}].pixel_values has {len(image.pixel_values)} floats, expected t*h*w*patch_dim "
                                f"= {image.num_patches}*{vision.patch_dim} = {expected} (one row of patch_dim per patch)")
        if not all(math.isfinite(v) for v in image.pixel_values):
            raise ContractError(f"{where}.images[{k}].pixel_values has non-finite values: every entry must be a finite float")
        if length != image.num_tokens(merge):
            raise ContractError(
                f"{where}.input_ids[{start}:{start + length}] holds {length} placeholders for images[{k}], whose grid {image.grid_thw} "
                f"fills t*h*w/{merge}**2 = {image.num_tokens(merge)}: the run must have exactly that many"
            )
        targets = [s for s in range(start, start + length) if loss_mask[s]]
        if targets:
            raise ContractError(f"{where}.loss_mask[{targets[0]}] = 1 on an image placeholder token: placeholders are inputs, "
                                "never targets; set their loss_mask to 0")
