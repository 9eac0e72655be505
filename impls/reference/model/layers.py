"""One decoder layer: pre-norm attention (GQA, RoPE, optional qk-norm) and a pre-norm SwiGLU MLP.

Mirrors transformers' LlamaAttention / Qwen3Attention, LlamaMLP and LlamaDecoderLayer, with
the same attribute names (self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm, mlp.{gate,up,down}_proj,
input_layernorm, post_attention_layernorm) so parameter names equal the checkpoint's. A MoE
model's sparse layers (Qwen3MoeDecoderLayer's choice) have a SparseMoeBlock (model/moe.py) as `mlp`.

Shapes: B batch, T sequence, C hidden_size, H query heads, K kv heads, D head_dim, F intermediate_size.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.moe import SparseMoeBlock
from packcheck.impls.reference.model.norm import RMSNorm
from packcheck.impls.reference.model.rope import apply_rope


class SelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        C, H, K, D = config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = H, K, D
        self.qk_norm = config.qk_norm
        self.q_proj = nn.Linear(C, H * D, bias=config.attention_bias)
        self.k_proj = nn.Linear(C, K * D, bias=config.attention_bias)
        self.v_proj = nn.Linear(C, K * D, bias=config.attention_bias)
        self.o_proj = nn.Linear(H * D, C, bias=False)
        if config.qk_norm:
            self.q_norm = RMSNorm(D, config.rms_norm_eps)
            self.k_norm = RMSNorm(D, config.rms_norm_eps)

    def forward(self, x_BTC, cos_BTD, sin_BTD, backend: AttentionBackend, mask: Any) -> torch.Tensor:
        B, T, _ = x_BTC.shape
        q_BTHD = self.q_proj(x_BTC).view(B, T, self.n_heads, self.head_dim)
        k_BTKD = self.k_proj(x_BTC).view(B, T, self.n_kv_heads, self.head_dim)
        v_BTKD = self.v_proj(x_BTC).view(B, T, self.n_kv_heads, self.head_dim)
        if self.qk_norm:  # qwen3: normalize each head's q and k before RoPE
            q_BTHD, k_BTKD = self.q_norm(q_BTHD), self.k_norm(k_BTKD)
        q_BHTD = apply_rope(q_BTHD.transpose(1, 2), cos_BTD, sin_BTD)
        k_BKTD = apply_rope(k_BTKD.transpose(1, 2), cos_BTD, sin_BTD)
        v_BKTD = v_BTKD.transpose(1, 2)
        o_BHTD = backend.attend(q_BHTD, k_BKTD, v_BKTD, mask, self.head_dim**-0.5)
        o_BTC = o_BHTD.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)
        return self.o_proj(o_BTC)


class SwiGLU(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        hidden, inner = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x_BTC: torch.Tensor) -> torch.Tensor:
        h_BTF = F.silu(self.gate_proj(x_BTC)) * self.up_proj(x_BTC)
        return self.down_proj(h_BTF)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_idx: int = 0):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = SelfAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SparseMoeBlock(config) if config.is_sparse_layer(layer_idx) else SwiGLU(config)

    def forward(self, x_BTC, cos_BTD, sin_BTD, backend: AttentionBackend, mask: Any) -> torch.Tensor:
        x_BTC = x_BTC + self.self_attn(self.input_layernorm(x_BTC), cos_BTD, sin_BTD, backend, mask)
        return x_BTC + self.mlp(self.post_attention_layernorm(x_BTC))
