"""RMSNorm: x * rsqrt(mean(x^2) + eps) * weight over the last dimension.

Mirrors transformers' LlamaRMSNorm / Qwen3RMSNorm, except that HF always normalizes in float32
while this normalizes in at least float32: the same for bf16/fp16/fp32, exact float64 in float64.
"""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        compute_dtype = torch.promote_types(x.dtype, torch.float32)
        x_float = x.to(compute_dtype)
        normed = x_float * torch.rsqrt(x_float.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"
