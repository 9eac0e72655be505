"""The block-level document-causal BlockMask (impls/reference/model/block_mask.py) has exactly the
partial and full blocks `create_block_mask` finds by evaluating the mask over every token pair, for
rows with length-1 documents, a document filling the row, documents straddling blocks, padding, and
a length that is not a multiple of the block; and FlexAttention with it equals SDPA with the dense mask."""

from __future__ import annotations

import pytest
import torch

from packcheck.impls.reference.data.rows import positions_and_segments
from packcheck.impls.reference.model.attention import document_causal_mask
from packcheck.impls.reference.model.block_mask import document_block_mask

ROWS = {
    "mixed": [[1, 1, 30, 16, 17, 1, 14], [64, 16], [3, 5, 7, 1, 1, 2, 40, 21]],  # 80 tokens, blocks of 16
    "ragged": [[1, 50, 19], [70], [20, 20, 20, 10]],  # 70 tokens: the last block is short
}


def segments(lengths_per_row: list[list[int]]) -> torch.Tensor:
    return torch.tensor([positions_and_segments(lengths)[1] for lengths in lengths_per_row])


def dense(count_B1N: torch.Tensor, indices_B1NN: torch.Tensor) -> torch.Tensor:
    n = indices_B1NN.shape[-1]
    taken_B1NN = torch.arange(n) < count_B1N[..., None]
    out = torch.zeros(indices_B1NN.shape, dtype=torch.bool)
    return out.scatter(-1, indices_B1NN.long(), taken_B1NN)


@pytest.mark.parametrize("rows", ROWS)
def test_blocks_equal_create_block_mask(rows):
    from torch.nn.attention.flex_attention import create_block_mask

    segment_ids_BT = segments(ROWS[rows])
    B, T = segment_ids_BT.shape

    def document_causal(b, h, q_idx, kv_idx):
        return (segment_ids_BT[b, q_idx] == segment_ids_BT[b, kv_idx]) & (kv_idx <= q_idx)

    want = create_block_mask(document_causal, B, None, T, T, device="cpu", BLOCK_SIZE=16)
    got = document_block_mask(segment_ids_BT, block=16)
    assert torch.equal(dense(got.kv_num_blocks, got.kv_indices), dense(want.kv_num_blocks, want.kv_indices))
    assert torch.equal(dense(got.full_kv_num_blocks, got.full_kv_indices), dense(want.full_kv_num_blocks, want.full_kv_indices))
    assert int(got.full_kv_num_blocks.sum()) > 0 and int(got.kv_num_blocks.sum()) > 0  # both kinds occur


def test_flex_with_the_block_mask_equals_sdpa_with_the_dense_mask():
    from torch.nn.attention.flex_attention import flex_attention

    segment_ids_BT = segments(ROWS["ragged"])
    B, T = segment_ids_BT.shape
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, 2, T, 8, dtype=torch.float64, generator=generator) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=document_causal_mask(segment_ids_BT))
    got = flex_attention(q, k, v, block_mask=document_block_mask(segment_ids_BT, block=16))
    assert (got - want).abs().max().item() <= 1e-12


def test_varlen_layout_equals_sdpa_with_the_dense_mask():
    """The varlen backend's cu_seqlens and token layout, with a CPU stand-in for the CUDA kernel (per-document SDPA)."""
    from packcheck.impls.reference.model.varlen_attention import cu_seqlens, varlen_attend

    def per_document(q_NHD, k_NKD, v_NKD, cu_q, cu_k, max_q, max_k, is_causal, scale):
        assert is_causal and torch.equal(cu_q, cu_k) and k_NKD.shape[1] == q_NHD.shape[1]  # heads repeated: no enable_gqa here
        out = torch.empty_like(q_NHD)
        for a, b in zip(cu_q[:-1].tolist(), cu_q[1:].tolist()):
            q, k, v = (x[a:b].transpose(0, 1) for x in (q_NHD, k_NKD, v_NKD))
            out[a:b] = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale).transpose(0, 1)
        return out

    segment_ids_BT = segments(ROWS["mixed"])
    B, T = segment_ids_BT.shape
    cu, longest = cu_seqlens(segment_ids_BT)
    assert cu.tolist()[:4] == [0, 1, 2, 32] and cu[-1].item() == B * T and longest == 64
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(B, 4, T, 8, dtype=torch.float64, generator=generator)
    k, v = (torch.randn(B, 2, T, 8, dtype=torch.float64, generator=generator) for _ in range(2))
    want = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                                            attn_mask=document_causal_mask(segment_ids_BT), scale=0.3)
    got = varlen_attend(q, k, v, (cu, longest), 0.3, per_document, frozenset({"is_causal", "scale"}))
    assert (got - want).abs().max().item() <= 1e-12
