"""A vision-language model's shape, read from a Qwen2.5-VL `config.json`: the text decoder's
ModelConfig, the vision tower's fields, the image placeholder token and the MRoPE split.

Mirrors the subset of transformers' Qwen2_5_VLConfig / Qwen2_5_VLVisionConfig that defines the
forward pass. The reference implements towers whose every block attends over the whole image
(`fullatt_block_indexes` lists every block): then Qwen2.5-VL's window permutation only reorders
tokens that attend to one another anyway, and is left out.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from packcheck.impls.reference.model.config import ModelConfig

VLM_MODEL_TYPES = ("qwen2_5_vl",)


@dataclass(frozen=True, kw_only=True, slots=True)
class VisionConfig:
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    in_channels: int
    patch_size: int
    temporal_patch_size: int
    spatial_merge_size: int
    out_hidden_size: int
    rope_theta: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def patch_dim(self) -> int:
        return self.in_channels * self.temporal_patch_size * self.patch_size**2


@dataclass(frozen=True, kw_only=True, slots=True)
class VLMConfig:
    model_type: str
    text: ModelConfig
    vision: VisionConfig
    image_token_id: int
    mrope_section: tuple[int, ...]  # rotary frequencies given to (time, height, width), summing to head_dim / 2

    def __post_init__(self):
        assert sum(self.mrope_section) * 2 == self.text.head_dim, "mrope_section splits the head's rotary frequencies"

    @property
    def num_experts(self) -> int:
        """The decoder's experts (0: dense), as the trainer asks every model's config."""
        return self.text.num_experts

    @classmethod
    def from_hf_dict(cls, hf: dict) -> VLMConfig:
        if hf.get("model_type") not in VLM_MODEL_TYPES:
            raise ValueError(f"unsupported model_type {hf.get('model_type')!r}; the reference VLM implements {', '.join(VLM_MODEL_TYPES)}")
        text, vision = hf["text_config"], hf["vision_config"]
        rope = text.get("rope_parameters") or {}
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"unsupported rope_type {rope.get('rope_type')!r}; the reference model implements only 'default' (MRoPE)")
        depth = vision["depth"]
        if sorted(vision.get("fullatt_block_indexes", [])) != list(range(depth)):
            raise ValueError(
                f"vision_config.fullatt_block_indexes = {vision.get('fullatt_block_indexes')}: the reference implements towers whose "
                f"every block attends over the whole image; list every block, {list(range(depth))}"
            )
        return cls(
            model_type=hf["model_type"],
            # Qwen2.5-VL's attention: head_dim = hidden_size / heads, biases on q, k and v
            text=dataclasses.replace(ModelConfig.from_hf_dict({**text, "model_type": "qwen2_5_vl_text", "head_dim": None}),
                                     attention_bias=True, tie_word_embeddings=bool(hf.get("tie_word_embeddings", False))),
            vision=VisionConfig(
                depth=depth, hidden_size=vision["hidden_size"], intermediate_size=vision["intermediate_size"],
                num_heads=vision["num_heads"], in_channels=vision.get("in_channels", 3), patch_size=vision["patch_size"],
                temporal_patch_size=vision.get("temporal_patch_size", 2), spatial_merge_size=vision.get("spatial_merge_size", 2),
                out_hidden_size=vision["out_hidden_size"],
                rope_theta=float((vision.get("rope_parameters") or {}).get("rope_theta", 10000.0)),
            ),
            image_token_id=int(hf["image_token_id"]),
            mrope_section=tuple(rope["mrope_section"]),
        )

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> VLMConfig:
        return cls.from_hf_dict(json.loads((Path(path) / "config.json").read_text()))

