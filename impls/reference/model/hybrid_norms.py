"""The two RMSNorms of the hybrid (Qwen3.5) family.

- `ZeroCentredRMSNorm`: x * rsqrt(mean(x^2) + eps) * (1 + weight); the weight is stored centred
  on zero. Mirrors transformers' Qwen3_5RMSNorm (decoder norms, final norm, q/k norms).
- `GatedRMSNorm`: (x * rsqrt(mean(x^2) + eps) * weight) * silu(gate), normalised before the gate.
  Mirrors transformers' Qwen3_5RMSNormGated, the GatedDeltaNet's output norm per value head.

HF computes both in float32 whatever the model's dtype; here in at least float32: the same for
bf16/fp16/fp32, exact float64 in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _normalized(x: torch.Tensor, eps: float) -> torch.Tensor:
    x_float = x.to(torch.promote_types(x.dtype, torch.float32))
    return x_float * torch.rsqrt(x_float.pow(2).mean(-1, keepdim=True) + eps)


class ZeroCentredRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = _normalized(x, self.eps)
        return (normed * (1.0 + self.weight.to(normed.dtype))).to(x.dtype)


class GatedRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        normed = self.weight * _normalized(x, self.eps).to(x.dtype)
        return (normed * F.silu(gate.to(torch.promote_types(gate.dtype, torch.float32)))).to(x.dtype)
