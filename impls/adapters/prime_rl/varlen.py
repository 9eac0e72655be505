"""A CPU stand-in for flash-attention 2's `flash_attn_varlen_func`, the one kernel prime-rl's models
call (`FlashAttention._funcs[2]`, and through Ulysses `ulysses_flash_attn_varlen_func`).

Same signature and layout as flash-attn: q [T, Hq, D], k and v [T, Hkv, D] (grouped-query heads
repeated), documents given by `cu_seqlens` (int32 offsets into T), causal inside each document and
nothing across. Each document runs through torch's sdpa on its own slice, so a boundary cannot leak
by construction; tests/adapters/prime_rl checks it against a dense block-diagonal causal attention
written out by hand. Refused rather than approximated: dropout, a sliding window, non-causal
attention, different query and key offsets (flash-attn's cross-attention form).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def flash_attn_varlen_func(q_THD, k_THD, v_THD, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), **unused):
    if dropout_p or tuple(window_size) != (-1, -1) or not causal:
        raise NotImplementedError(f"the CPU varlen stand-in runs causal attention only, without dropout or a window "
                                  f"(got causal={causal}, dropout_p={dropout_p}, window_size={window_size})")
    if not torch.equal(cu_seqlens_q, cu_seqlens_k):
        raise NotImplementedError("the CPU varlen stand-in needs cu_seqlens_q == cu_seqlens_k (self-attention)")
    if int(cu_seqlens_q[-1]) != q_THD.shape[0]:
        raise ValueError(f"cu_seqlens ends at {int(cu_seqlens_q[-1])} but q has {q_THD.shape[0]} tokens")
    groups = q_THD.shape[1] // k_THD.shape[1]
    out_THD = torch.empty_like(q_THD)
    bounds = cu_seqlens_q.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        q_HSD = q_THD[start:end].transpose(0, 1)
        k_HSD = k_THD[start:end].transpose(0, 1).repeat_interleave(groups, dim=0)
        v_HSD = v_THD[start:end].transpose(0, 1).repeat_interleave(groups, dim=0)
        out_HSD = F.scaled_dot_product_attention(q_HSD, k_HSD, v_HSD, is_causal=True, scale=softmax_scale)
        out_THD[start:end] = out_HSD.transpose(0, 1)
    return out_THD
