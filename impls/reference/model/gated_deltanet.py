"""The GatedDeltaNet token mixer of the hybrid (Qwen3.5) family.

x -> in_proj_qkv -> short causal conv + SiLU (per document) -> q, k, v heads; q, k
l2-normalised, q scaled by K^-0.5, key heads repeated to the value heads; beta = sigmoid(in_proj_b
x), g = -exp(A_log) * softplus(in_proj_a x + dt_bias) -> gated delta rule (per document) -> gated
RMSNorm with z = in_proj_z x -> out_proj. Mirrors transformers' Qwen3_5GatedDeltaNet (training
forward, no cache) with the same attribute names, so parameter names equal the checkpoint's.

Conv and recurrence need the whole row: under context parallelism the layer's input is gathered
(`shards.gather`), the layer runs on the whole row, and this rank keeps its shard of the output.

Shapes: B batch, S this rank's tokens, T the whole row, C hidden_size, M conv channels, G key
heads, H value heads, K key head dim, V value head dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from packcheck.impls.reference.model.delta_rule import l2_normalized
from packcheck.impls.reference.model.hybrid_config import HybridConfig
from packcheck.impls.reference.model.hybrid_norms import GatedRMSNorm
from packcheck.impls.reference.model.linear_attention import LinearAttentionBackend
from packcheck.impls.reference.model.row_shards import RowShards


class GatedDeltaNet(nn.Module):
    def __init__(self, config: HybridConfig):
        super().__init__()
        C = config.hidden_size
        self.n_key_heads, self.n_value_heads = config.linear_num_key_heads, config.linear_num_value_heads
        self.key_dim, self.value_dim = config.linear_key_head_dim, config.linear_value_head_dim
        G, H, K, V = self.n_key_heads, self.n_value_heads, self.key_dim, self.value_dim
        M = 2 * G * K + H * V
        W = config.linear_conv_kernel_dim
        self.conv1d = nn.Conv1d(M, M, kernel_size=W, groups=M, bias=False, padding=W - 1)  # only its weight is used
        self.dt_bias = nn.Parameter(torch.ones(H))
        self.A_log = nn.Parameter(torch.zeros(H))
        self.norm = GatedRMSNorm(V, config.rms_norm_eps)
        self.out_proj = nn.Linear(H * V, C, bias=False)
        self.in_proj_qkv = nn.Linear(C, M, bias=False)
        self.in_proj_z = nn.Linear(C, H * V, bias=False)
        self.in_proj_b = nn.Linear(C, H, bias=False)
        self.in_proj_a = nn.Linear(C, H, bias=False)

    def forward(self, x_BSC: torch.Tensor, segment_ids_BT: torch.Tensor, backend: LinearAttentionBackend,
                shards: RowShards) -> torch.Tensor:
        G, H, K, V = self.n_key_heads, self.n_value_heads, self.key_dim, self.value_dim
        x_BTC = shards.gather(x_BSC)
        B, T, _ = x_BTC.shape
        mixed_BTM = backend.conv(self.in_proj_qkv(x_BTC), self.conv1d.weight[:, 0], segment_ids_BT, shards)
        q_BTGK, k_BTGK, v_BTHV = mixed_BTM.split([G * K, G * K, H * V], dim=-1)
        compute = torch.promote_types(x_BSC.dtype, torch.float32)  # HF: l2norm, scale and gates in float32 at least
        q_BTHK, k_BTHK = (
            l2_normalized(x.reshape(B, T, G, K).to(compute)).repeat_interleave(H // G, dim=2) for x in (q_BTGK, k_BTGK)
        )
        q_BTHK = q_BTHK * K**-0.5
        beta_BTH = self.in_proj_b(x_BTC).sigmoid()
        g_BTH = -self.A_log.to(compute).exp() * F.softplus(self.in_proj_a(x_BTC).to(compute) + self.dt_bias)
        o_BTHV = backend.delta_rule(q_BTHK, k_BTHK, v_BTHV.reshape(B, T, H, V), g_BTH, beta_BTH, segment_ids_BT)
        o_BSHV = shards.local(o_BTHV)
        S = o_BSHV.shape[1]
        z_BSHV = self.in_proj_z(x_BSC).view(B, S, H, V)
        return self.out_proj(self.norm(o_BSHV, z_BSHV).reshape(B, S, H * V))
