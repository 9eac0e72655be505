"""The hybrid (Qwen3.5) causal LM: GatedDeltaNet and gated full-attention layers, by `layer_types`.

Mirrors transformers' Qwen3_5ForCausalLM (`model.embed_tokens`, `model.layers.N.linear_attn` or
`.self_attn`, `.mlp`, zero-centred `input_layernorm`/`post_attention_layernorm`, `model.norm`,
`lm_head`), so `named_parameters()` yields exactly the checkpoint's names. The forward has the
dense CausalLM's signature (explicit positions and segment ids, an attention backend): full
attention is document-causal through the backend; the linear-attention layers reset their conv
and recurrent state at every document start, through `linear_attention` (a backend name of
linear_attention.py: "torch", the per-document loop, or "fla" on CUDA). Under context
parallelism the attention backend carries the row's shards (`row_shards`) and the
linear-attention layers gather the whole row through them.

Shapes: B batch, T sequence (this rank's part under CP), C hidden_size, R rotary dims, V vocab.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from packcheck.impls.reference.model.attention import AttentionBackend, get_attention_backend
from packcheck.impls.reference.model.gated_attention import GatedAttention
from packcheck.impls.reference.model.gated_deltanet import GatedDeltaNet
from packcheck.impls.reference.model.hybrid_config import HybridConfig
from packcheck.impls.reference.model.hybrid_norms import ZeroCentredRMSNorm
from packcheck.impls.reference.model.layers import SwiGLU
from packcheck.impls.reference.model.linear_attention import LinearAttentionBackend, get_linear_attention_backend
from packcheck.impls.reference.model.rope import rope_cos_sin


class HybridDecoderLayer(nn.Module):
    def __init__(self, config: HybridConfig, layer_type: str):
        super().__init__()
        self.layer_type = layer_type
        if layer_type == "linear_attention":
            self.linear_attn = GatedDeltaNet(config)
        else:
            self.self_attn = GatedAttention(config)
        self.mlp = SwiGLU(config)
        self.input_layernorm = ZeroCentredRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = ZeroCentredRMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x_BTC, cos_BTR, sin_BTR, backend: AttentionBackend, mask: Any,
                linear: LinearAttentionBackend, row_segment_ids: torch.Tensor) -> torch.Tensor:
        h_BTC = self.input_layernorm(x_BTC)
        if self.layer_type == "linear_attention":
            x_BTC = x_BTC + self.linear_attn(h_BTC, row_segment_ids, linear, backend.row_shards)
        else:
            x_BTC = x_BTC + self.self_attn(h_BTC, cos_BTR, sin_BTR, backend, mask)
        return x_BTC + self.mlp(self.post_attention_layernorm(x_BTC))


class HybridStack(nn.Module):
    def __init__(self, config: HybridConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(HybridDecoderLayer(config, layer_type) for layer_type in config.layer_types)
        self.norm = ZeroCentredRMSNorm(config.hidden_size, config.rms_norm_eps)


class HybridCausalLM(nn.Module):
    config_class = HybridConfig

    def __init__(self, config: HybridConfig):
        super().__init__()
        self.config = config
        self.linear_attention: str | LinearAttentionBackend = "torch"
        self.model = HybridStack(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids_BT: torch.Tensor,
        position_ids_BT: torch.Tensor,
        segment_ids_BT: torch.Tensor,
        attention: str | AttentionBackend = "sdpa",
    ) -> torch.Tensor:
        assert input_ids_BT.shape == position_ids_BT.shape == segment_ids_BT.shape, "ids, positions, segments must align"
        backend = attention if isinstance(attention, AttentionBackend) else get_attention_backend(attention)
        linear = get_linear_attention_backend(self.linear_attention)
        mask = backend.build_mask(segment_ids_BT)
        row_segment_ids = backend.row_shards.gather_ids(segment_ids_BT)
        x_BTC = self.model.embed_tokens(input_ids_BT)
        cos_BTR, sin_BTR = rope_cos_sin(position_ids_BT, self.config.rotary_dim, self.config.rope_theta, x_BTC.dtype)
        for layer in self.model.layers:
            x_BTC = layer(x_BTC, cos_BTR, sin_BTR, backend, mask, linear, row_segment_ids)
        return self.lm_head(self.model.norm(x_BTC))  # logits_BTV
