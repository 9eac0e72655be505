"""Ring context parallelism: each rank keeps its queries; key/value shards travel around the
ring, one hop per step, and each step's partial attention is merged by log-sum-exp.

After cp - 1 hops every query has seen every key shard. Masks use global token indices and the
row's global segment ids, so causality and document boundaries hold across shard cuts. The
backward is autograd's: gradients of each key/value shard travel back around the ring to their
owner (`ring_shift`'s backward). Written for exactness, not speed: the scores of a shard pair
are materialised, in float32 at least (as attention kernels accumulate), then cast back.

Shapes: B batch, H heads, S = T / cp a shard, D head_dim.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.model.attention import AttentionBackend, repeat_kv
from packcheck.impls.reference.parallel.comm import all_gather_no_grad, ring_shift
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.row_gather import gathered_rows


def _block(q_BHSD, k_BHSD, v_BHSD, allowed_BSS, scale):
    """Attention of the local queries to one key shard: output and log-sum-exp, [B,H,S,D] and [B,H,S]."""
    scores = (q_BHSD @ k_BHSD.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed_BSS[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.exp(scores - lse[..., None].masked_fill(lse[..., None] == float("-inf"), 0.0))
    return weights @ v_BHSD, lse


def _merge(out, lse, block_out, block_lse):
    """Combine two partial softmax attentions; rows that saw nothing yet carry lse = -inf."""
    new_lse = torch.logaddexp(lse, block_lse)
    safe = new_lse.masked_fill(new_lse == float("-inf"), 0.0)
    return out * torch.exp(lse - safe)[..., None] + block_out * torch.exp(block_lse - safe)[..., None], new_lse


def ring_backend(mesh: Mesh) -> AttentionBackend:
    group, cp, me = mesh.cp_group, mesh.cp, mesh.cp_rank

    def build_mask(segment_ids_BS):
        S = segment_ids_BS.shape[1]
        segments_BT = all_gather_no_grad(segment_ids_BS, group, dim=1)
        index = torch.arange(cp * S, device=segment_ids_BS.device)
        return segments_BT, index, S

    def allowed(context, owner):
        segments_BT, index, S = context
        queries, keys = slice(me * S, (me + 1) * S), slice(owner * S, (owner + 1) * S)
        same_document = segments_BT[:, queries, None] == segments_BT[:, None, keys]
        causal = index[keys][None, :] <= index[queries][:, None]
        return same_document & causal[None]

    def attend(q_BHSD, k_BKSD, v_BKSD, context, scale):
        n_rep = q_BHSD.shape[1] // k_BKSD.shape[1]
        k, v = repeat_kv(k_BKSD, n_rep), repeat_kv(v_BKSD, n_rep)
        compute = torch.promote_types(q_BHSD.dtype, torch.float32)
        q = q_BHSD.to(compute)
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=compute, device=q.device)
        for step in range(cp):
            owner = (me - step) % cp  # whose key/value shard this rank holds at this step
            out, lse = _merge(out, lse, *_block(q, k.to(compute), v.to(compute), allowed(context, owner), scale))
            if step < cp - 1:
                k, v = ring_shift(k, group), ring_shift(v, group)
        return out.to(q_BHSD.dtype)

    return AttentionBackend(name="ring", description="ring context parallelism (key/value shards passed around)", build_mask=build_mask, attend=attend,
                            row_shards=gathered_rows(mesh))
