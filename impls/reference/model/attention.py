"""Attention backends by name: each turns (q, k, v, per-token segment ids) into the attention output.

A token attends causally to earlier tokens of its own segment in its own row (document-causal
attention), which is what packing needs. A backend has two verbs: `build_mask` runs once per
forward from the segment ids, `attend` runs in every layer with that mask.

- "sdpa": SDPA with an explicit boolean block-diagonal causal mask [B, 1, T, T]; any dtype and
  device, with backward; the float64 oracle.
- "sdpa_causal": SDPA with `is_causal=True` and no mask; it ignores the segment ids, so it is
  right only when each row holds one document (unpacked, right-padded). The caller decides that.
- "flex": FlexAttention with a document-causal BlockMask, compiled on first use (GPU; on CPU it
  runs forward only).

"flash" (flash-attention's varlen kernel, flash_attention.py) and "varlen" (torch's, varlen_attention.py)
are CUDA kernels from packages that may be missing: not in this table, the engine builds them when a case
asks for them (impls/reference/engine.py, KERNEL_ATTENTION).

Shapes: B batch, T sequence, H query heads, K kv heads, D head_dim.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from packcheck.impls.reference.model.row_shards import WHOLE_ROW, RowShards


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionBackend:
    name: str
    description: str
    build_mask: Callable[[torch.Tensor], Any]
    attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Any, float], torch.Tensor]
    row_shards: RowShards = WHOLE_ROW  # how layers that need the whole row (linear attention) reach it under CP


def repeat_kv(x_BKTD: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Each kv head repeated n_rep times in place, as transformers' `repeat_kv`: [B, K*n_rep, T, D]."""
    return x_BKTD.repeat_interleave(n_rep, dim=1)


def document_causal_mask(segment_ids_BT: torch.Tensor) -> torch.Tensor:
    """True where query t may attend key s: same segment and s <= t. [B, 1, T, T]."""
    T = segment_ids_BT.shape[1]
    same_segment_BTT = segment_ids_BT[:, :, None] == segment_ids_BT[:, None, :]
    causal_TT = torch.ones(T, T, dtype=torch.bool, device=segment_ids_BT.device).tril()
    return (same_segment_BTT & causal_TT)[:, None]


def _sdpa_attend(q_BHTD, k_BKTD, v_BKTD, mask_B1TT, scale):
    n_rep = q_BHTD.shape[1] // k_BKTD.shape[1]
    k_BHTD, v_BHTD = repeat_kv(k_BKTD, n_rep), repeat_kv(v_BKTD, n_rep)
    return F.scaled_dot_product_attention(q_BHTD, k_BHTD, v_BHTD, attn_mask=mask_B1TT, scale=scale)


def _sdpa_causal_attend(q_BHTD, k_BKTD, v_BKTD, _mask, scale):
    n_rep = q_BHTD.shape[1] // k_BKTD.shape[1]
    k_BHTD, v_BHTD = repeat_kv(k_BKTD, n_rep), repeat_kv(v_BKTD, n_rep)
    return F.scaled_dot_product_attention(q_BHTD, k_BHTD, v_BHTD, is_causal=True, scale=scale)


def _flex_block_mask(segment_ids_BT: torch.Tensor):
    from torch.nn.attention.flex_attention import create_block_mask

    def document_causal(b, h, q_idx, kv_idx):
        return (segment_ids_BT[b, q_idx] == segment_ids_BT[b, kv_idx]) & (kv_idx <= q_idx)

    B, T = segment_ids_BT.shape
    return create_block_mask(document_causal, B, None, T, T, device=segment_ids_BT.device)


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    # uncompiled flex_attention materializes the full score matrix; compiling gives the fused kernel.
    # dynamic: every layout has other row counts and lengths, and one kernel per shape would hit
    # dynamo's recompile limit (then flex silently falls back to the unfused path)
    return torch.compile(flex_attention, dynamic=True)


def _flex_attend(q_BHTD, k_BKTD, v_BKTD, block_mask, scale):
    enable_gqa = q_BHTD.shape[1] != k_BKTD.shape[1]
    return _compiled_flex_attention()(q_BHTD, k_BKTD, v_BKTD, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


ATTENTION_BACKENDS: dict[str, AttentionBackend] = {backend.name: backend for backend in (
    AttentionBackend(
        name="sdpa",
        description="SDPA with an explicit boolean document-causal mask; the float64 oracle",
        build_mask=document_causal_mask,
        attend=_sdpa_attend,
    ),
    AttentionBackend(
        name="sdpa_causal",
        description="SDPA is_causal=True, segment ids ignored: only for one document per row",
        build_mask=lambda segment_ids_BT: None,
        attend=_sdpa_causal_attend,
    ),
    AttentionBackend(
        name="flex",
        description="compiled FlexAttention with a document-causal BlockMask",
        build_mask=_flex_block_mask,
        attend=_flex_attend,
    ),
)}


def get_attention_backend(name: str) -> AttentionBackend:
    """The backend `name` (the engine's capabilities admit only these names into a Case)."""
    if name not in ATTENTION_BACKENDS:
        raise KeyError(f"no attention backend {name!r}; the reference has {', '.join(ATTENTION_BACKENDS)}")
    return ATTENTION_BACKENDS[name]
