"""The gated delta rule through flash-linear-attention's chunked Triton kernel, varlen.

Every document of every row becomes one sequence of fla's `cu_seqlens` (the rows flattened to
one, the boundaries from the segment ids), so the kernel starts each document from a zero state
exactly as the per-document loop does (delta_rule.py). CUDA only (Triton), float32 or bf16;
`fla-core` 0.6.0 is imported only when this runs. q and k arrive l2-normalised, q already scaled,
key heads already repeated to the value heads (fla's own GVA is not relied upon), so the kernel's
scale is 1 and its in-kernel l2norm off; q, k and beta go in v's dtype, as transformers passes them.

Shapes: B batch, T sequence, H value heads, K key head dim, V value head dim.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.model.documents import document_starts


def cu_seqlens_of(segment_ids_BT: torch.Tensor) -> torch.Tensor:
    """Offsets of every document in the flattened rows, plus the total: [documents + 1] int64."""
    starts = document_starts(segment_ids_BT).flatten().nonzero().flatten()
    return torch.cat([starts, starts.new_tensor([segment_ids_BT.numel()])])


def fla_gated_delta_rule(q_BTHK, k_BTHK, v_BTHV, g_BTH, beta_BTH, segment_ids_BT) -> torch.Tensor:
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    B, T = segment_ids_BT.shape

    def flat(x):  # [B, T, ...] -> [1, B*T, ...]
        return x.reshape(1, B * T, *x.shape[2:]).contiguous()

    o_1NHV, _ = chunk_gated_delta_rule(
        flat(q_BTHK.to(v_BTHV.dtype)), flat(k_BTHK.to(v_BTHV.dtype)), flat(v_BTHV), flat(g_BTH).float(), flat(beta_BTH.to(v_BTHV.dtype)),
        scale=1.0, cu_seqlens=cu_seqlens_of(segment_ids_BT),
    )
    return o_1NHV.reshape(B, T, *o_1NHV.shape[2:]).to(v_BTHV.dtype)


def fla_available() -> bool:
    try:
        import fla.ops.gated_delta_rule  # noqa: F401
    except Exception:  # ImportError, or Triton failing to initialise without a GPU
        return False
    return True


def fla_backward_usable() -> bool:
    """fla imports and will run its backward here. fla 0.6.0 refuses the gated delta rule's backward
    on Hopper (H100/H200) with Triton >= 3.4.0 and < 3.7.1 unless tilelang is installed (fla #640:
    that Triton miscompiles chunk_bwd_dqkwg); its own flags say whether this is such a machine."""
    if not fla_available():
        return False
    from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1

    if IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1:
        try:
            import tilelang  # noqa: F401
        except ImportError:
            return False
    return True
