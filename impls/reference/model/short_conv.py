"""The GatedDeltaNet's short causal convolution, per document, followed by SiLU.

A depthwise causal conv1d of width W over q, k and v channels: out[t] = sum_j weight[:, W-1-j]
* x[t-j] for j < W, where x[t-j] counts only if token t-j belongs to token t's document (the
conv state is zero at every document start, as a varlen kernel with cu_seqlens does). Mirrors
transformers' `causal_conv1d_fn` (F.conv1d with W-1 left padding, then SiLU) on one document.

Shapes: B batch, T sequence, M channels, W kernel width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from packcheck.impls.reference.model.documents import document_index


def document_causal_conv(x_BTM: torch.Tensor, weight_MW: torch.Tensor, segment_ids_BT: torch.Tensor) -> torch.Tensor:
    W, T = weight_MW.shape[1], x_BTM.shape[1]
    document_BT = document_index(segment_ids_BT)
    out_BTM = x_BTM * weight_MW[:, W - 1]
    for j in range(1, min(W, T)):
        same_document_BT = torch.zeros_like(document_BT, dtype=torch.bool)
        same_document_BT[:, j:] = document_BT[:, j:] == document_BT[:, :-j]
        earlier_BTM = F.pad(x_BTM, (0, 0, j, 0))[:, :T] * same_document_BT[..., None]  # x[t-j], 0 across a boundary
        out_BTM = out_BTM + earlier_BTM * weight_MW[:, W - 1 - j]
    return F.silu(out_BTM)
