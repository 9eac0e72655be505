"""Document-causal attention through flash-attention's varlen kernel: flash-attn-4's CuTe kernel
(`flash_attn.cute.flash_attn_varlen_func`, JIT-compiled on first use) where it imports, else flash-attn
2's (`flash_attn.flash_attn_varlen_func`). CUDA only, bfloat16 or float16 only. The layout and the mask
are torch's varlen backend's (varlen_attention.py): the rows' tokens laid end to end, one sequence per
document, described by cu_seqlens built once per forward from the segment ids.

Both kernels take fewer key/value heads than query heads (GQA) as they are, and the reference's scale
as `softmax_scale`. They differ in the call: flash-attn-4's fourth positional parameter is `qv` (MLA), so
everything after k and v goes by keyword, and it returns (out, lse); flash-attn 2 returns out alone.
flash-attn-4's call is kept out of torch.compile (`torch.compiler.disable`): it is a Python autograd.Function
over a CuTe DSL JIT, not a registered op, so a compiled decoder layer (reference.fast) breaks its graph around
the call rather than have dynamo trace into the JIT.

Shapes: B batch, T sequence, H query heads, K kv heads, D head_dim, N = B*T tokens, S documents.
"""

from __future__ import annotations

from typing import Callable

import torch

from packcheck.harness.engines.kernel_findings import kernel_finding
from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.varlen_attention import cu_seqlens, end_to_end

# (q_NHD, k_NKD, v_NKD, cu_seqlens [S + 1] int32, longest document, scale) -> o_NHD
VarlenCall = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, float], torch.Tensor]
DISTRIBUTION = {"flash-attn-4": "flash-attn-4", "flash-attn 2": "flash-attn"}  # flash_kernel's package -> what pip calls it
INSTALL = "pip install flash-attn-4 (its CuTe kernel; Hopper or Blackwell) or flash-attn (2.x, a CUDA build)"


def flash4_call(varlen_func) -> VarlenCall:
    """flash-attn-4's `flash_attn_varlen_func` (tests pass a CPU stand-in) as a VarlenCall."""
    def call(q_NHD, k_NKD, v_NKD, cu_S1, longest, scale):
        o_NHD, _lse = varlen_func(q_NHD, k_NKD, v_NKD, cu_seqlens_q=cu_S1, cu_seqlens_k=cu_S1, max_seqlen_q=longest,
                                  max_seqlen_k=longest, softmax_scale=scale, causal=True)
        return o_NHD
    return call


def flash2_call(varlen_func) -> VarlenCall:
    """flash-attn 2's `flash_attn_varlen_func` (tests pass a CPU stand-in) as a VarlenCall."""
    def call(q_NHD, k_NKD, v_NKD, cu_S1, longest, scale):
        return varlen_func(q_NHD, k_NKD, v_NKD, cu_S1, cu_S1, longest, longest, softmax_scale=scale, causal=True)
    return call


def flash_attend(q_BHTD, k_BKTD, v_BKTD, mask, scale, call: VarlenCall) -> torch.Tensor:
    cu_S1, longest = mask
    return end_to_end(q_BHTD, k_BKTD, v_BKTD, lambda q_NHD, k_NKD, v_NKD: call(q_NHD, k_NKD, v_NKD, cu_S1, longest, scale))


def flash_kernel() -> tuple[str, VarlenCall]:
    """(the package, its varlen call): flash-attn-4 where it imports, else flash-attn 2; ImportError naming both otherwise."""
    try:
        from flash_attn.cute import flash_attn_varlen_func
    except ImportError as no_fa4:
        try:
            from flash_attn import flash_attn_varlen_func
        except ImportError as no_fa2:
            raise ImportError(f"attention backend 'flash' needs flash-attn: {INSTALL} (flash_attn.cute: {no_fa4}; "
                              f"flash_attn: {no_fa2})") from None
        return "flash-attn 2", flash2_call(flash_attn_varlen_func)
    return "flash-attn-4", flash4_call(torch.compiler.disable(flash_attn_varlen_func))


def flash_backend(kernel: tuple[str, VarlenCall] | None = None) -> AttentionBackend:
    """The backend over `kernel` (default: `flash_kernel()`, which raises ImportError where neither package imports)."""
    package, call = kernel or flash_kernel()

    def attend(q_BHTD, k_BKTD, v_BKTD, mask, scale):
        return flash_attend(q_BHTD, k_BKTD, v_BKTD, mask, scale, call)

    return AttentionBackend(name="flash", build_mask=cu_seqlens, attend=attend,
                            description=f"{package}'s varlen kernel over the documents of the rows laid end to end (CUDA)")


def known_wrong(head_dim: int, capability: tuple[int, int], kernel: tuple[str, VarlenCall] | None = None) -> str | None:
    """Why the flash kernel (default: `flash_kernel()`) must not run attention of `head_dim` on a GPU of `capability`: a
    known kernel finding marks its installed release wrong there (harness/engines/kernel_findings.py); None otherwise."""
    package, _call = kernel or flash_kernel()
    finding = kernel_finding(DISTRIBUTION[package], head_dim, capability)
    return None if finding is None else finding.refusal("attention backend 'flash'")
