"""The model's shape, read from a Hugging Face `config.json`: the fields a decoder (dense or MoE) needs.

Mirrors the subset of transformers' LlamaConfig / Qwen3Config / Qwen3MoeConfig that defines the
forward pass. `model_type` picks the family; `qwen3` adds a per-head RMSNorm on q and k (qk-norm);
`qwen3_moe` adds sparse MoE layers (model/moe.py) and the router's load-balancing loss coefficient.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

QK_NORM_BY_MODEL_TYPE = {"llama": False, "qwen3": True, "qwen3_moe": True, "qwen2_5_vl_text": False}


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    tie_word_embeddings: bool
    attention_bias: bool = False  # q/k/v projections with a bias (Qwen2 and the Qwen2.5-VL decoder)
    # MoE (qwen3_moe); num_experts = 0 is a dense model
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = False
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple[int, ...] = ()
    router_aux_loss_coef: float = 0.0  # 0 unless HF's output_router_logits is on: HF adds the aux loss only then

    def __post_init__(self):
        assert self.num_attention_heads % self.num_key_value_heads == 0, "query heads must be a multiple of kv heads"
        assert self.head_dim % 2 == 0, "RoPE rotates pairs of dimensions"
        assert self.num_experts == 0 or 0 < self.num_experts_per_tok <= self.num_experts, "each token needs 1..num_experts experts"

    @property
    def qk_norm(self) -> bool:
        return QK_NORM_BY_MODEL_TYPE[self.model_type]

    def is_sparse_layer(self, layer_idx: int) -> bool:
        """Whether layer `layer_idx` has a sparse MoE block, as Qwen3MoeDecoderLayer decides."""
        return layer_idx not in self.mlp_only_layers and self.num_experts > 0 and (layer_idx + 1) % self.decoder_sparse_step == 0

    @property
    def sparse_layers(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.num_hidden_layers) if self.is_sparse_layer(i))

    @classmethod
    def from_hf_dict(cls, hf: dict) -> ModelConfig:
        model_type = hf.get("model_type")
        if model_type not in QK_NORM_BY_MODEL_TYPE:
            raise ValueError(
                f"unsupported model_type {model_type!r}; the reference model implements "
                f"{', '.join(sorted(QK_NORM_BY_MODEL_TYPE))}"
            )
        # transformers 5 nests the base under rope_parameters; earlier versions wrote rope_theta at top level
        rope_theta = (hf.get("rope_parameters") or {}).get("rope_theta", hf.get("rope_theta", 10000.0))
        rope_type = (hf.get("rope_parameters") or {}).get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(f"unsupported rope_type {rope_type!r}; the reference model implements only 'default'")
        return cls(
            model_type=model_type,
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_hidden_layers=hf["num_hidden_layers"],
            num_attention_heads=hf["num_attention_heads"],
            num_key_value_heads=hf.get("num_key_value_heads") or hf["num_attention_heads"],
            head_dim=attention_head_dim(hf),
            rms_norm_eps=hf["rms_norm_eps"],
            rope_theta=float(rope_theta),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            **(_moe_fields(hf) if model_type == "qwen3_moe" else {}),
        )

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> ModelConfig:
        return cls.from_hf_dict(json.loads((Path(path) / "config.json").read_text()))


def attention_head_dim(hf: dict) -> int:
    """The head size of a config.json's attention (its language model's: a VLM's or a hybrid's text_config)."""
    text = hf.get("text_config", hf)
    return text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]


def _moe_fields(hf: dict) -> dict:
    """Qwen3MoeConfig's MoE fields, with its defaults where config.json leaves one out."""
    return dict(
        num_experts=hf.get("num_experts", hf.get("num_local_experts", 128)),  # transformers 5 writes num_local_experts
        num_experts_per_tok=hf.get("num_experts_per_tok", 8),
        moe_intermediate_size=hf.get("moe_intermediate_size", 768),
        norm_topk_prob=bool(hf.get("norm_topk_prob", False)),
        decoder_sparse_step=hf.get("decoder_sparse_step", 1),
        mlp_only_layers=tuple(hf.get("mlp_only_layers") or ()),
        router_aux_loss_coef=float(hf.get("router_aux_loss_coef", 0.001)) if hf.get("output_router_logits") else 0.0,
    )
