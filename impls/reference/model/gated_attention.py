"""The full-attention layer of the hybrid (Qwen3.5) family: gated, qk-normed, partial RoPE.

q_proj yields, per head, the query and an output gate (interleaved per head: [q_h | gate_h]);
q and k pass a zero-centred RMSNorm per head, RoPE rotates the first `rotary_dim` dimensions of
each head and leaves the rest, attention runs through the same backends as the dense layers
(document-causal; ulysses/ring under CP), and the output is multiplied by sigmoid(gate) before
o_proj. Mirrors transformers' Qwen3_5Attention with the same attribute names.

Shapes: B batch, T sequence, C hidden_size, H query heads, K kv heads, D head_dim, R rotary dims.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.hybrid_config import HybridConfig
from packcheck.impls.reference.model.hybrid_norms import ZeroCentredRMSNorm
from packcheck.impls.reference.model.rope import apply_rope


def apply_partial_rope(x_BNTD: torch.Tensor, cos_BTR: torch.Tensor, sin_BTR: torch.Tensor) -> torch.Tensor:
    R = cos_BTR.shape[-1]
    return torch.cat([apply_rope(x_BNTD[..., :R], cos_BTR, sin_BTR), x_BNTD[..., R:]], dim=-1)


class GatedAttention(nn.Module):
    def __init__(self, config: HybridConfig):
        super().__init__()
        C, H, K, D = config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = H, K, D
        self.q_proj = nn.Linear(C, H * D * 2, bias=False)
        self.k_proj = nn.Linear(C, K * D, bias=False)
        self.v_proj = nn.Linear(C, K * D, bias=False)
        self.o_proj = nn.Linear(H * D, C, bias=False)
        self.q_norm = ZeroCentredRMSNorm(D, config.rms_norm_eps)
        self.k_norm = ZeroCentredRMSNorm(D, config.rms_norm_eps)

    def forward(self, x_BTC, cos_BTR, sin_BTR, backend: AttentionBackend, mask: Any) -> torch.Tensor:
        B, T, _ = x_BTC.shape
        H, D = self.n_heads, self.head_dim
        q_BTHD, gate_BTHD = self.q_proj(x_BTC).view(B, T, H, 2 * D).chunk(2, dim=-1)
        k_BTKD = self.k_proj(x_BTC).view(B, T, self.n_kv_heads, D)
        v_BKTD = self.v_proj(x_BTC).view(B, T, self.n_kv_heads, D).transpose(1, 2)
        q_BHTD = apply_partial_rope(self.q_norm(q_BTHD).transpose(1, 2), cos_BTR, sin_BTR)
        k_BKTD = apply_partial_rope(self.k_norm(k_BTKD).transpose(1, 2), cos_BTR, sin_BTR)
        o_BHTD = backend.attend(q_BHTD, k_BKTD, v_BKTD, mask, D**-0.5)
        o_BTC = o_BHTD.transpose(1, 2).reshape(B, T, H * D) * torch.sigmoid(gate_BTHD.reshape(B, T, H * D))
        return self.o_proj(o_BTC)
