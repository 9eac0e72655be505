"""Rotary position embedding, HF "rotate_half" convention, default (unscaled) frequencies.

Mirrors transformers' `compute_default_rope_parameters`, `LlamaRotaryEmbedding.forward` and
`apply_rotary_pos_emb`: inv_freq = 1 / theta^(arange(0, D, 2) / D), angle = position * inv_freq,
the D/2 angles duplicated to D, and x * cos + rotate_half(x) * sin. HF computes angles in
float32; here they are computed in at least float32, so float64 positions are exact float64.

Shapes: B batch, T sequence, N heads (query or kv), D head_dim.
"""

from __future__ import annotations

import torch


def rope_cos_sin(position_ids_BT: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position's angles, [B, T, D] each, cast to `dtype`."""
    compute_dtype = torch.promote_types(dtype, torch.float32)
    exponent_D2 = torch.arange(0, head_dim, 2, dtype=compute_dtype, device=position_ids_BT.device) / head_dim
    inv_freq_D2 = 1.0 / (theta**exponent_D2)
    angle_BTD2 = position_ids_BT.to(compute_dtype)[..., None] * inv_freq_D2
    angle_BTD = torch.cat((angle_BTD2, angle_BTD2), dim=-1)
    return angle_BTD.cos().to(dtype), angle_BTD.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x_BNTD: torch.Tensor, cos_BTD: torch.Tensor, sin_BTD: torch.Tensor) -> torch.Tensor:
    cos_B1TD, sin_B1TD = cos_BTD[:, None], sin_BTD[:, None]
    return x_BNTD * cos_B1TD + rotate_half(x_BNTD) * sin_B1TD
