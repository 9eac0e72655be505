"""The GatedDeltaNet backends: per-document resets, fla's cu_seqlens, and fla against the loop on CUDA.

Shapes: B rows, T tokens, H value heads, K key head dim, V value head dim, M conv channels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from packcheck.impls.reference.model.delta_rule import l2_normalized, recurrent_gated_delta_rule
from packcheck.impls.reference.model.fla_delta_rule import cu_seqlens_of, fla_backward_usable, fla_gated_delta_rule
from packcheck.impls.reference.model.linear_attention import default_linear_attention
from packcheck.impls.reference.model.short_conv import document_causal_conv

SEGMENTS_BT = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2], [5, 5, 5, 5, 5, 5, 9, 9]])


def test_cu_seqlens_are_every_document_of_every_row_flattened():
    assert cu_seqlens_of(SEGMENTS_BT).tolist() == [0, 3, 5, 8, 14, 16]


def test_conv_and_delta_rule_of_a_packed_row_equal_each_document_alone():
    generator = torch.Generator().manual_seed(0)
    B, T, H, K, V, M, W = 2, 8, 2, 4, 3, 5, 4
    x_BTM = torch.randn(B, T, M, generator=generator, dtype=torch.float64)
    weight_MW = torch.randn(M, W, generator=generator, dtype=torch.float64)
    q, k = (l2_normalized(torch.randn(B, T, H, K, generator=generator, dtype=torch.float64)) for _ in range(2))
    v = torch.randn(B, T, H, V, generator=generator, dtype=torch.float64)
    g = -torch.rand(B, T, H, generator=generator, dtype=torch.float64) * 0.1
    beta = torch.rand(B, T, H, generator=generator, dtype=torch.float64)
    conv_BTM = document_causal_conv(x_BTM, weight_MW, SEGMENTS_BT)
    o_BTHV = recurrent_gated_delta_rule(q, k, v, g, beta, SEGMENTS_BT)
    for row in range(B):
        bounds = cu_seqlens_of(SEGMENTS_BT[row:row + 1]).tolist()
        for start, end in zip(bounds[:-1], bounds[1:]):
            doc = slice(start, end)
            alone_conv = F.silu(F.conv1d(x_BTM[row:row + 1, doc].transpose(1, 2), weight_MW[:, None], padding=W - 1, groups=M)[..., :end - start])
            torch.testing.assert_close(conv_BTM[row, doc], alone_conv[0].transpose(0, 1), rtol=1e-13, atol=1e-13)
            alone_o = recurrent_gated_delta_rule(*(t[row:row + 1, doc] for t in (q, k, v, g, beta)), torch.zeros(1, end - start))
            torch.testing.assert_close(o_BTHV[row, doc], alone_o[0], rtol=0, atol=0)


def test_the_cpu_default_is_the_per_document_loop():
    assert default_linear_attention("cpu", torch.float64) == "torch"
    assert default_linear_attention("cpu", torch.float32) == "torch"


@pytest.mark.skipif(not torch.cuda.is_available() or not fla_backward_usable(),
                    reason="needs CUDA and fla-core 0.6.0 whose backward runs here (docs/gpu.md: not on Hopper with Triton < 3.7.1)")
def test_fla_varlen_matches_the_per_document_loop_on_cuda():
    generator = torch.Generator().manual_seed(0)
    segments = torch.repeat_interleave(torch.arange(6), torch.tensor([1, 30, 64, 7, 90, 64]))[None].cuda()
    T, H, K, V = segments.shape[1], 4, 64, 64
    q = (l2_normalized(torch.randn(1, T, H, K, generator=generator)) * K**-0.5).cuda()
    k = l2_normalized(torch.randn(1, T, H, K, generator=generator)).cuda()
    v, upstream = (torch.randn(1, T, H, V, generator=generator).cuda() for _ in range(2))
    g = (-0.02 * F.softplus(torch.randn(1, T, H, generator=generator) - 4.0)).cuda()
    beta = torch.rand(1, T, H, generator=generator).cuda()
    outputs = {}
    for rule in (fla_gated_delta_rule, recurrent_gated_delta_rule):
        leaves = [x.clone().requires_grad_() for x in (q, k, v, g, beta)]
        o = rule(*leaves, segments)
        o.backward(upstream)
        outputs[rule] = (o.detach(), [x.grad for x in leaves])
    (o_fla, grads_fla), (o_loop, grads_loop) = outputs.values()
    assert ((o_fla - o_loop).abs().max() / o_loop.abs().max()).item() < 1e-2  # fla's float32 dots run in TF32
    for a, b in zip(grads_fla, grads_loop):
        assert ((a - b).abs().max() / b.abs().max()).item() < 1e-2
