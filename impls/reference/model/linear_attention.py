"""GatedDeltaNet backends by name: how the short conv and the gated delta rule see a row.

A backend has two verbs, both over whole rows with the row's segment ids (under context
parallelism the layer gathers the row first, see row_shards.py):
- `conv(x_BTM, weight_MW, segment_ids_BT, shards)`: the causal short conv + SiLU;
- `delta_rule(q, k, v, g, beta, segment_ids_BT)`: the recurrence, o [B, T, H, V].

- "torch": the per-document loop in plain torch (short_conv.py, delta_rule.py); any dtype and
  device, with autograd's backward; the float64 oracle and the CPU default.
- "fla": the same conv, and flash-linear-attention's chunked varlen kernel (cu_seqlens from the
  segment ids) for the delta rule; CUDA, float32/bf16. The CUDA default where fla imports and its
  backward runs (not on Hopper with Triton < 3.7.1 and no tilelang: fla 0.6.0 refuses it there).

The switch is the hybrid model's `linear_attention` attribute (a name here, or a backend value);
the reference engine sets it from `ReferenceEngine.linear_attention_backend(case)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from packcheck.impls.reference.model.delta_rule import recurrent_gated_delta_rule
from packcheck.impls.reference.model.fla_delta_rule import fla_backward_usable, fla_gated_delta_rule
from packcheck.impls.reference.model.row_shards import RowShards
from packcheck.impls.reference.model.short_conv import document_causal_conv

Conv = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, RowShards], torch.Tensor]
DeltaRule = Callable[..., torch.Tensor]


@dataclass(frozen=True, kw_only=True, slots=True)
class LinearAttentionBackend:
    name: str
    description: str
    conv: Conv
    delta_rule: DeltaRule


def _per_document_conv(x_BTM, weight_MW, segment_ids_BT, shards: RowShards):
    return document_causal_conv(x_BTM, weight_MW, segment_ids_BT)  # shard cuts are no boundary: the row is whole


LINEAR_ATTENTION_BACKENDS: dict[str, LinearAttentionBackend] = {backend.name: backend for backend in (
    LinearAttentionBackend(
        name="torch",
        description="per-document conv and token-by-token gated delta rule in plain torch; the float64 oracle",
        conv=_per_document_conv,
        delta_rule=recurrent_gated_delta_rule,
    ),
    LinearAttentionBackend(
        name="fla",
        description="flash-linear-attention's chunked gated delta rule, varlen (cu_seqlens per document); CUDA",
        conv=_per_document_conv,
        delta_rule=fla_gated_delta_rule,
    ),
)}


def get_linear_attention_backend(backend: str | LinearAttentionBackend) -> LinearAttentionBackend:
    if isinstance(backend, LinearAttentionBackend):
        return backend
    if backend not in LINEAR_ATTENTION_BACKENDS:
        raise KeyError(f"no linear-attention backend {backend!r}; the reference has {', '.join(LINEAR_ATTENTION_BACKENDS)}")
    return LINEAR_ATTENTION_BACKENDS[backend]


def default_linear_attention(device: str, dtype: torch.dtype) -> str:
    """fla's kernel on CUDA in float32/bf16 where it imports and can run its backward (a training step
    needs it; fla_delta_rule.fla_backward_usable); the per-document loop otherwise."""
    if str(device).startswith("cuda") and dtype in (torch.float32, torch.bfloat16) and fla_backward_usable():
        return "fla"
    return "torch"
