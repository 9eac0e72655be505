"""Document-causal attention through torch's own varlen (flash) attention, `torch.nn.attention.varlen`
(CUDA only; torch >= 2.10): the rows' tokens laid end to end, one sequence per document, described by
cu_seqlens built once per forward from the segment ids.

The API moved between releases: torch 2.10 takes `is_causal=True`, later releases `window_size=(-1, 0)`,
`scale=` and (2.12) `enable_gqa=`; without enable_gqa the key/value heads are repeated first. The
default scale is 1/sqrt(D), the reference's. `build_mask` reads the longest document back to the host
(one synchronisation per forward).

Shapes: B batch, T sequence, H query heads, K kv heads, D head_dim, N = B*T tokens, S documents.
"""

from __future__ import annotations

import inspect

import torch

from packcheck.impls.reference.model.attention import AttentionBackend, repeat_kv
from packcheck.impls.reference.model.documents import document_starts


def cu_seqlens(segment_ids_BT: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(cumulative document starts over the flattened rows [S + 1] int32, the longest document)."""
    starts_N = document_starts(segment_ids_BT).reshape(-1)  # every row's first token starts a document
    total = torch.tensor([starts_N.numel()], device=segment_ids_BT.device)
    cu_S1 = torch.cat([starts_N.nonzero().squeeze(-1), total]).to(torch.int32)
    return cu_S1, int((cu_S1[1:] - cu_S1[:-1]).max())


def varlen_kwargs(parameters: frozenset[str], scale: float, gqa: bool) -> dict:
    kwargs = {"is_causal": True} if "is_causal" in parameters else {"window_size": (-1, 0)}
    if "scale" in parameters:
        kwargs["scale"] = scale
    if gqa:
        kwargs["enable_gqa"] = True
    return kwargs


def end_to_end(q_BHTD, k_BKTD, v_BKTD, attend_NHD) -> torch.Tensor:
    """`attend_NHD(q_NHD, k_NKD, v_NKD) -> o_NHD` on the rows' tokens laid end to end (the layout of
    cu_seqlens), its output back as [B, H, T, D]."""
    B, H, T, D = q_BHTD.shape
    q_NHD, k_NKD, v_NKD = (x.transpose(1, 2).reshape(B * T, x.shape[1], D) for x in (q_BHTD, k_BKTD, v_BKTD))
    return attend_NHD(q_NHD, k_NKD, v_NKD).view(B, T, H, D).transpose(1, 2)


def varlen_attend(q_BHTD, k_BKTD, v_BKTD, mask, scale, varlen, parameters: frozenset[str]):
    """`varlen`: torch's varlen_attn (tests pass a CPU stand-in); `parameters`: the keywords it takes."""
    cu_S1, longest = mask
    H = q_BHTD.shape[1]
    gqa = H != k_BKTD.shape[1]
    if gqa and "enable_gqa" not in parameters:
        k_BKTD, v_BKTD = repeat_kv(k_BKTD, H // k_BKTD.shape[1]), repeat_kv(v_BKTD, H // k_BKTD.shape[1])
        gqa = False
    kwargs = varlen_kwargs(parameters, scale, gqa)
    return end_to_end(q_BHTD, k_BKTD, v_BKTD,
                      lambda q_NHD, k_NKD, v_NKD: varlen(q_NHD, k_NKD, v_NKD, cu_S1, cu_S1, longest, longest, **kwargs))


def varlen_backend() -> AttentionBackend:
    """The backend over this torch's varlen_attn (ImportError where torch has none)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as missing:
        raise ImportError(f"attention backend 'varlen' needs torch >= 2.10 (torch.nn.attention.varlen); this is torch "
                          f"{torch.__version__}: {missing}") from None

    parameters = frozenset(inspect.signature(varlen_attn).parameters)

    def attend(q_BHTD, k_BKTD, v_BKTD, mask, scale):
        return varlen_attend(q_BHTD, k_BKTD, v_BKTD, mask, scale, varlen_attn, parameters)

    return AttentionBackend(name="varlen", build_mask=cu_seqlens, attend=attend,
                            description="torch.nn.attention.varlen (flash) over the documents of the rows laid end to end (CUDA)")
