"""The Case's Llama checkpoint as a torchtitan llama3 model, and torchtitan's names back to Hugging Face's.

The model config is torchtitan's own llama3 builder (`_build_llama3_layers`, as its registry's
flavours use it) at the checkpoint's shapes, with the flex attention backend: documents are kept
apart by the flex block mask torchtitan builds from positions. Differences from the registry's
flavours, each forced by the checkpoint: RMSNorm eps and RoPE theta from config.json, no llama
RoPE scaling (the harness's models use the default rotation), untied embeddings, and separate
wq/wk/wv projections (`fuse_qkv=False`, a builder option) so every gradient maps one-to-one onto
a Hugging Face parameter through the state-dict adapter's `to_hf` (which applies the q/k
permutation between torchtitan's complex RoPE and Hugging Face's rotate-half).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def hf_config(checkpoint: str) -> dict:
    return json.loads((Path(checkpoint) / "config.json").read_text())


def rope_theta(config: dict) -> float:
    params = config.get("rope_parameters") or {}
    if params.get("rope_type", "default") != "default":
        raise ValueError(f"rope_parameters.rope_type is {params['rope_type']!r}: the torchtitan adapter maps the default rotation only")
    return float(params.get("rope_theta", config.get("rope_theta", 10000.0)))


def model_config(config: dict):
    """torchtitan's Llama3Model.Config at the shapes of a Hugging Face Llama config.json."""
    from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
    from torchtitan.models.llama3 import _EMBEDDING_INIT, _NORM_INIT, Llama3Model, _build_llama3_layers, _output_linear_init

    dim, vocab, eps = config["hidden_size"], config["vocab_size"], config["rms_norm_eps"]
    n_heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or dim // n_heads
    if head_dim * n_heads != dim:
        raise ValueError(f"head_dim {head_dim} x {n_heads} heads != hidden_size {dim}: torchtitan's llama3 derives head_dim from dim")
    layers = _build_llama3_layers(
        n_layers=config["num_hidden_layers"], dim=dim, n_heads=n_heads,
        n_kv_heads=config.get("num_key_value_heads", n_heads), hidden_dim=config["intermediate_size"],
        rope=ComplexRoPE.Config(dim=head_dim, max_seq_len=max(config.get("max_position_embeddings", 2048), 131072),
                                theta=rope_theta(config), scaling="none"),
        fuse_qkv=False, attn_backend="flex",
    )
    for layer in layers:
        layer.attention_norm.eps = eps
        layer.ffn_norm.eps = eps
    return Llama3Model.Config(
        dim=dim, vocab_size=vocab, enable_weight_tying=bool(config.get("tie_word_embeddings", False)),
        tok_embeddings=Embedding.Config(num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT),
        norm=RMSNorm.Config(normalized_shape=dim, eps=eps, param_init=_NORM_INIT),
        lm_head=Linear.Config(in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)),
        layers=layers,
    )


def state_dict_adapter(config):
    from torchtitan.models.llama3 import Llama3StateDictAdapter

    return Llama3StateDictAdapter(config, None)


def build_model(checkpoint: str, dtype: str, device: torch.device):
    """(model, its config): built on meta as torchtitan's Trainer builds it, then the checkpoint's weights
    loaded through torchtitan's Hugging Face state-dict adapter."""
    from torchtitan.tools.utils import set_default_dtype

    config = model_config(hf_config(checkpoint))
    with torch.device("meta"), set_default_dtype(DTYPES[dtype]):
        model = config.build()
    model.to_empty(device=device)
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    hf_weights = {}
    for file in sorted(Path(checkpoint).glob("*.safetensors")):
        hf_weights |= load_file(str(file))
    weights = state_dict_adapter(config).from_hf(hf_weights)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"torchtitan model vs checkpoint {checkpoint}: missing {missing}, unexpected {unexpected}")
    model.train()
    return model, config


def to_hf(config, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """torchtitan-named tensors (gradients, parameters) under their Hugging Face names, on the CPU."""
    return {name: t.detach().to("cpu") for name, t in state_dict_adapter(config).to_hf(tensors).items()}


def hf_name(config, name: str, parameter: torch.Tensor) -> str:
    """The Hugging Face name of one torchtitan parameter."""
    (hf,) = state_dict_adapter(config).to_hf({name: parameter.detach()})
    return hf
