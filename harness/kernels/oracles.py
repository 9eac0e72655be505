"""The per-document math of each kind of kernel, in plain torch: run in float64 it is the oracle every kernel is judged
against; run in the kernel's dtype it is the same-precision reference whose own error sets the tolerance
(tolerance.py). Each document is computed alone, from a zero state, so nothing can cross a boundary.

Every function takes the kernel's inputs (inputs.py) and the packing (`Packing`) and returns its outputs by name, as
every kernel of registry.py does. Shapes: N tokens, H heads, K kv heads, D head dim, S documents, C channels, W width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True, slots=True)
class Packing:
    """The documents of one packed row as varlen kernels take them."""

    cu_seqlens: torch.Tensor  # [S + 1] int32, on the kernel's device
    spans: tuple[tuple[int, int], ...]  # (start, end) of each document
    longest: int
    scale: float  # the attention's softmax scale, and the delta rule's query scale: head_dim ** -0.5

    @classmethod
    def of(cls, documents: tuple[int, ...], head_dim: int, device: str) -> Packing:
        ends = torch.tensor(documents).cumsum(0).tolist()
        starts = [0, *ends[:-1]]
        return cls(torch.tensor([0, *ends], dtype=torch.int32, device=device), tuple(zip(starts, ends)), max(documents), head_dim ** -0.5)

    @property
    def document_index(self) -> torch.Tensor:
        """[N] int32: which document each token belongs to (causal-conv1d's seq_idx)."""
        lengths = torch.tensor([end - start for start, end in self.spans])
        return torch.repeat_interleave(torch.arange(len(self.spans), dtype=torch.int32), lengths).to(self.cu_seqlens.device)


def attention(x: dict, packing: Packing) -> dict:
    """Causal softmax attention inside each document; kv head j serves query heads j*r .. j*r + r - 1."""
    q_NHD, k_NKD, v_NKD = x["q"], x["k"], x["v"]
    ratio = q_NHD.shape[1] // k_NKD.shape[1]
    outs = []
    for start, end in packing.spans:
        q_HLD = q_NHD[start:end].transpose(0, 1)
        k_HLD, v_HLD = (t[start:end].transpose(0, 1).repeat_interleave(ratio, dim=0) for t in (k_NKD, v_NKD))
        scores_HLL = (q_HLD @ k_HLD.transpose(1, 2)) * packing.scale
        future_LL = torch.ones(end - start, end - start, dtype=torch.bool, device=q_NHD.device).triu(1)
        outs.append((scores_HLL.masked_fill(future_LL, float("-inf")).softmax(dim=-1) @ v_HLD).transpose(0, 1))
    return {"out": torch.cat(outs)}


def gated_delta_rule(x: dict, packing: Packing) -> dict:
    """S_t = exp(g_t) S_{t-1};  S_t += k_t (beta_t (v_t - S_t^T k_t))^T;  o_t = S_t^T (scale q_t); S = 0 at each document's
    start; the final state of each document [S, H, D, D] too."""
    q, k, v, g, beta = x["q"] * packing.scale, x["k"], x["v"], x["g"], x["beta"]
    outs, finals = [], []
    for start, end in packing.spans:
        state_HKV = torch.zeros(v.shape[1], k.shape[2], v.shape[2], dtype=v.dtype, device=v.device)
        for t in range(start, end):
            state_HKV = state_HKV * g[t].exp()[:, None, None]
            remembered_HV = (state_HKV * k[t, :, :, None]).sum(dim=1)
            delta_HV = (v[t] - remembered_HV) * beta[t, :, None]
            state_HKV = state_HKV + k[t, :, :, None] * delta_HV[:, None, :]
            outs.append((state_HKV * q[t, :, :, None]).sum(dim=1))
        finals.append(state_HKV)
    return {"out": torch.stack(outs), "final_state": torch.stack(finals)}


def short_conv(x: dict, packing: Packing) -> dict:
    """SiLU of the depthwise causal convolution: out[t] = sum_j weight[:, W-1-j] x[t-j], over the taps j inside t's
    document (the state is zero at its start)."""
    x_NC, weight_CW = x["x"], x["weight"]
    W, outs = weight_CW.shape[1], []
    for start, end in packing.spans:
        doc_LC = x_NC[start:end]
        acc_LC = doc_LC * weight_CW[:, W - 1]
        for j in range(1, min(W, end - start)):
            acc_LC = acc_LC + F.pad(doc_LC[:-j], (0, 0, j, 0)) * weight_CW[:, W - 1 - j]
        outs.append(F.silu(acc_LC))
    return {"out": torch.cat(outs)}
