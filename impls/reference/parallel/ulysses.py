"""Ulysses context parallelism: all-to-all from sequence shards to head shards, full-sequence
document-causal attention on H/cp heads, all-to-all back.

Segment ids stay global: each rank gathers the whole row's segment ids once per forward, so a
document that straddles a shard cut is one document. Key/value heads are repeated to the query
heads first, so any cp dividing the number of query heads works with grouped-query attention.

Shapes: B batch, H query heads, T the full row, S = T / cp a shard, D head_dim.
"""

from __future__ import annotations

import torch.nn.functional as F

from packcheck.impls.reference.model.attention import AttentionBackend, document_causal_mask, repeat_kv
from packcheck.impls.reference.parallel.comm import all_gather_no_grad, all_to_all
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.row_gather import gathered_rows

SEQ, HEADS = 2, 1


def ulysses_backend(mesh: Mesh) -> AttentionBackend:
    group = mesh.cp_group

    def build_mask(segment_ids_BS):
        return document_causal_mask(all_gather_no_grad(segment_ids_BS, group, dim=1))  # [B, 1, T, T]

    def attend(q_BHSD, k_BKSD, v_BKSD, mask_B1TT, scale):
        n_rep = q_BHSD.shape[1] // k_BKSD.shape[1]
        k_BHSD, v_BHSD = repeat_kv(k_BKSD, n_rep), repeat_kv(v_BKSD, n_rep)
        q, k, v = (all_to_all(x, group, scatter_dim=HEADS, gather_dim=SEQ) for x in (q_BHSD, k_BHSD, v_BHSD))  # [B, H/cp, T, D]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask_B1TT, scale=scale)
        return all_to_all(o, group, scatter_dim=SEQ, gather_dim=HEADS)  # [B, H, S, D]

    return AttentionBackend(name="ulysses", description="Ulysses all-to-all context parallelism", build_mask=build_mask, attend=attend,
                            row_shards=gathered_rows(mesh))
