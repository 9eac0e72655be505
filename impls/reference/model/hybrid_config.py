"""The shape of a hybrid (Qwen3.5) model, read from a Hugging Face `config.json`.

Mirrors the subset of transformers' Qwen3_5TextConfig that defines the text forward pass: which
layers are GatedDeltaNet linear attention and which are (gated) full attention (`layer_types`),
the linear-attention heads and conv kernel, and RoPE on the first `partial_rotary_factor` of each
full-attention head. Image/video positions (MRoPE sections) do not exist for text-only rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

HYBRID_MODEL_TYPES = frozenset({"qwen3_5_text"})
LAYER_TYPES = frozenset({"linear_attention", "full_attention"})


@dataclass(frozen=True, kw_only=True, slots=True)
class HybridConfig:
    num_experts: ClassVar[int] = 0  # dense MLPs: the step's router pre-pass is off (Qwen3.5-MoE is not a family here)
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]
    # full attention
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rope_theta: float
    partial_rotary_factor: float
    # linear attention (GatedDeltaNet)
    linear_conv_kernel_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    rms_norm_eps: float
    tie_word_embeddings: bool

    def __post_init__(self):
        assert len(self.layer_types) == self.num_hidden_layers, "one layer type per layer"
        assert set(self.layer_types) <= LAYER_TYPES, f"layer types are {sorted(LAYER_TYPES)}"
        assert self.num_attention_heads % self.num_key_value_heads == 0, "query heads must be a multiple of kv heads"
        assert self.linear_num_value_heads % self.linear_num_key_heads == 0, "value heads must be a multiple of key heads"
        assert self.rotary_dim % 2 == 0, "RoPE rotates pairs of dimensions"

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @classmethod
    def from_hf_dict(cls, hf: dict) -> HybridConfig:
        model_type = hf.get("model_type")
        if model_type not in HYBRID_MODEL_TYPES:
            raise ValueError(f"model_type {model_type!r} is not a hybrid family; the hybrid model implements {sorted(HYBRID_MODEL_TYPES)}")
        rope = hf.get("rope_parameters") or {}
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"unsupported rope_type {rope['rope_type']!r}; the reference model implements only 'default'")
        for field_name, supported in (("hidden_act", "silu"), ("attention_bias", False)):
            if hf.get(field_name, supported) != supported:
                raise ValueError(f"unsupported {field_name}={hf[field_name]!r}; the reference hybrid model implements {supported!r}")
        return cls(
            model_type=model_type,
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_hidden_layers=hf["num_hidden_layers"],
            layer_types=tuple(hf["layer_types"]),
            num_attention_heads=hf["num_attention_heads"],
            num_key_value_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
            head_dim=hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
            rope_theta=float(rope.get("rope_theta", 10000.0)),
            partial_rotary_factor=float(rope.get("partial_rotary_factor", 0.25)),
            linear_conv_kernel_dim=hf["linear_conv_kernel_dim"],
            linear_num_key_heads=hf["linear_num_key_heads"],
            linear_num_value_heads=hf["linear_num_value_heads"],
            linear_key_head_dim=hf["linear_key_head_dim"],
            linear_value_head_dim=hf["linear_value_head_dim"],
            rms_norm_eps=hf["rms_norm_eps"],
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        )

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> HybridConfig:
        return cls.from_hf_dict(json.loads((Path(path) / "config.json").read_text()))


def is_hybrid_checkpoint(path: str | Path) -> bool:
    return json.loads((Path(path) / "config.json").read_text()).get("model_type") in HYBRID_MODEL_TYPES
