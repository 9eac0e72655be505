"""The varlen attention kernels an engine calls, each as a `KernelCall` over one packed row (causal inside each
document, fewer kv heads than query heads where the case has them, the softmax scale head_dim ** -0.5).

The calls are the reference's (impls/reference/model/flash_attention.py, varlen_attention.py, attention.py), written
again here: the harness imports no engine. flash-attn-4's fourth positional parameter is `qv`, so everything after k and
v goes by keyword, and it returns (out, lse). Each loader imports its package when called: an ImportError is the
kernel's unsupported verdict, with the reason. Shapes: N tokens, H heads, K kv heads, D head dim.
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from packcheck.harness.kernels.evaluate import KernelCall
from packcheck.harness.kernels.oracles import Packing


def sdpa_per_document(device: str) -> KernelCall:
    """torch's scaled_dot_product_attention on each document alone (is_causal), the way an engine without a varlen
    kernel runs packed documents; any device and dtype."""
    def call(x: dict, packing: Packing) -> dict:
        outs = [F.scaled_dot_product_attention(*(x[n][start:end].transpose(0, 1) for n in "qkv"), is_causal=True,
                                               scale=packing.scale, enable_gqa=True).transpose(0, 1)
                for start, end in packing.spans]
        return {"out": torch.cat(outs)}
    return call


def flex_document_mask(device: str) -> KernelCall:
    """FlexAttention over the packed row with a document-causal BlockMask: compiled on CUDA (the fused kernel an engine
    runs), eager on the CPU (torch 2.13 runs only its forward there)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    attend = torch.compile(flex_attention, dynamic=True) if device == "cuda" else flex_attention

    def call(x: dict, packing: Packing) -> dict:
        document_N = packing.document_index
        N = document_N.numel()

        def document_causal(b, h, q_idx, kv_idx):
            return (document_N[q_idx] == document_N[kv_idx]) & (kv_idx <= q_idx)

        mask = create_block_mask(document_causal, 1, None, N, N, device=device)
        q, k, v = (x[n].transpose(0, 1)[None] for n in "qkv")  # [1, heads, N, D]
        out = attend(q, k, v, block_mask=mask, scale=packing.scale, enable_gqa=q.shape[1] != k.shape[1])
        return {"out": out[0].transpose(0, 1)}
    return call


def torch_varlen(device: str) -> KernelCall:
    """torch.nn.attention.varlen (torch >= 2.10; CUDA): `is_causal` in 2.10, `window_size=(-1, 0)`, `scale` and (2.12)
    `enable_gqa` after; without enable_gqa the kv heads are repeated first."""
    from torch.nn.attention.varlen import varlen_attn

    parameters = frozenset(inspect.signature(varlen_attn).parameters)

    def call(x: dict, packing: Packing) -> dict:
        q, k, v = x["q"], x["k"], x["v"]
        gqa = q.shape[1] != k.shape[1]
        if gqa and "enable_gqa" not in parameters:
            k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
            gqa = False
        kwargs = ({"is_causal": True} if "is_causal" in parameters else {"window_size": (-1, 0)}) | (
            {"scale": packing.scale} if "scale" in parameters else {}) | ({"enable_gqa": True} if gqa else {})
        cu = packing.cu_seqlens
        return {"out": varlen_attn(q, k, v, cu, cu, packing.longest, packing.longest, **kwargs)}
    return call


def flash_attn_4(device: str) -> KernelCall:
    from flash_attn.cute import flash_attn_varlen_func

    def call(x: dict, packing: Packing) -> dict:
        cu = packing.cu_seqlens
        out, _lse = flash_attn_varlen_func(x["q"], x["k"], x["v"], cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=packing.longest,
                                           max_seqlen_k=packing.longest, softmax_scale=packing.scale, causal=True)
        return {"out": out}
    return call


def flash_attn_2(device: str) -> KernelCall:
    from flash_attn import flash_attn_varlen_func

    def call(x: dict, packing: Packing) -> dict:
        cu = packing.cu_seqlens
        return {"out": flash_attn_varlen_func(x["q"], x["k"], x["v"], cu, cu, packing.longest, packing.longest,
                                              softmax_scale=packing.scale, causal=True)}
    return call
