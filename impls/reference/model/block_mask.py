"""A document-causal FlexAttention BlockMask computed at block granularity from the segment ids, on
their device, and the attention backend that uses it inside compiled decoder layers.

FlexAttention skips the (query block, key block) tiles a BlockMask leaves out and applies the
mask_mod only in its partial tiles. With each row's documents as contiguous runs (document.py), a
query block's and a key block's documents are ranges [first, last], so for key block j and query
block i of the same row:

    needed   iff  j <= i  and  last[j] >= first[i]       (causal, and the ranges meet)
    full     iff  j <  i  and  first[i] == last[i] == first[j] == last[j]   (one document throughout;
                  a short last block of a row whose length is not a multiple of 128 is never full)
    partial  =    needed and not full                     (the mask_mod decides per token)

That is a few [B, n, n] comparisons (n = ceil(T / 128)), against `create_block_mask`'s evaluation of
the mask_mod over all B x T x T pairs (a 1 GiB boolean at one 32k row). tests/test_block_mask.py
checks both masks are the same blocks. The mask_mod compares document indices (runs of equal
segment ids), the same documents the block ranges describe.

Shapes: B batch, T sequence, N blocks per row.
"""

from __future__ import annotations

import torch

from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.documents import document_index

BLOCK = 128  # FlexAttention's default tile


def _ordered(blocks_BNN: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A dense [B, N, N] block pattern as BlockMask's (count [B, 1, N], indices [B, 1, N, N]: the set blocks first)."""
    count_B1N = blocks_BNN.sum(-1, dtype=torch.int32)[:, None]
    indices_B1NN = torch.argsort(blocks_BNN.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)[:, None]
    return count_B1N, indices_B1NN


def document_block_mask(segment_ids_BT: torch.Tensor, block: int = BLOCK):
    from torch.nn.attention.flex_attention import BlockMask

    T = segment_ids_BT.shape[1]
    document_BT = document_index(segment_ids_BT)
    n = -(-T // block)
    starts_N = torch.arange(n, device=segment_ids_BT.device) * block
    first_BN = document_BT[:, starts_N]
    last_BN = document_BT[:, (starts_N + block - 1).clamp(max=T - 1)]
    query_N1, key_1N = starts_N[:, None], starts_N[None, :]
    needed_BNN = (key_1N <= query_N1) & (last_BN[:, None, :] >= first_BN[:, :, None])
    single_BN = (first_BN == last_BN) & (starts_N + block <= T)  # a short last block stays partial, as create_block_mask has it
    full_BNN = (key_1N < query_N1) & single_BN[:, :, None] & single_BN[:, None, :] & (first_BN[:, :, None] == first_BN[:, None, :])

    def document_causal(b, h, q_idx, kv_idx):
        return (document_BT[b, q_idx] == document_BT[b, kv_idx]) & (kv_idx <= q_idx)

    return BlockMask.from_kv_blocks(*_ordered(needed_BNN & ~full_BNN), *_ordered(full_BNN), BLOCK_SIZE=block,
                                    mask_mod=document_causal, seq_lengths=(T, T))


def _flex_attend(q_BHTD, k_BKTD, v_BKTD, block_mask, scale):
    from torch.nn.attention.flex_attention import flex_attention

    # called inside a compiled decoder layer (compiled_layers.py), which fuses it; eager it materialises the scores
    return flex_attention(q_BHTD, k_BKTD, v_BKTD, block_mask=block_mask, scale=scale, enable_gqa=q_BHTD.shape[1] != k_BKTD.shape[1])


FLEX_BLOCKS = AttentionBackend(
    name="flex_blocks",
    description="FlexAttention inside compiled decoder layers, with a document-causal BlockMask built per block from the segment ids",
    build_mask=document_block_mask,
    attend=_flex_attend,
)
