"""The gated delta rule, token by token, with the state reset at every document start.

Per value head, a state S [K, V] is decayed, corrected toward the new value along the key
(the delta rule), and read by the query:

    S_t = exp(g_t) S_{t-1};  S_t += k_t (beta_t (v_t - S_t^T k_t))^T;  o_t = S_t^T q_t

with S = 0 at the first token of each document. Mirrors transformers'
`torch_recurrent_gated_delta_rule` line for line (q and k arrive l2-normalised, q scaled by
K^-0.5, key heads repeated to the value heads), vectorised over rows and heads; HF runs it in
float32 whatever the model's dtype, this in at least float32 (exact float64 in float64).

Shapes: B batch, T sequence, H value heads, K key head dim, V value head dim.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.model.documents import document_starts


def l2_normalized(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x * rsqrt(sum(x^2) + eps) over the last dim, as transformers' (and fla's) `l2norm`."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def recurrent_gated_delta_rule(q_BTHK, k_BTHK, v_BTHV, g_BTH, beta_BTH, segment_ids_BT) -> torch.Tensor:
    """o [B, T, H, V] in v's dtype, the state starting at zero in every document."""
    compute = torch.promote_types(v_BTHV.dtype, torch.float32)
    q, k, v, g, beta = (x.to(compute) for x in (q_BTHK, k_BTHK, v_BTHV, g_BTH, beta_BTH))
    B, T, H, K = k.shape
    starts_BT = document_starts(segment_ids_BT)
    state_BHKV = torch.zeros(B, H, K, v.shape[-1], dtype=compute, device=v.device)
    outputs = []
    for t in range(T):
        state_BHKV = torch.where(starts_BT[:, t, None, None, None], 0.0, state_BHKV)  # a new document: empty state
        state_BHKV = state_BHKV * g[:, t].exp()[..., None, None]
        k_BHK, q_BHK = k[:, t], q[:, t]
        remembered_BHV = (state_BHKV * k_BHK[..., None]).sum(dim=-2)
        delta_BHV = (v[:, t] - remembered_BHV) * beta[:, t, :, None]
        state_BHKV = state_BHKV + k_BHK[..., None] * delta_BHV[..., None, :]
        outputs.append((state_BHKV * q_BHK[..., None]).sum(dim=-2))
    return torch.stack(outputs, dim=1).to(v_BTHV.dtype)
