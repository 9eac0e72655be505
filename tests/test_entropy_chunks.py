"""The reference's entropy bonus a chunk of positions at a time (impls/reference/loss/entropy.py) gives the plain
formula's values and gradients (from logits bit for bit, in float64 and bfloat16; from reference.fast's LmHeadInputs,
whose lm_head matmul and weight gradient are split by the chunks, to float64 rounding), and keeps no [B, T, V] float32
tensor for backward."""

from __future__ import annotations

import pytest
import torch

from packcheck.impls.reference.loss import entropy
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs

B, T, C, V = 2, 37, 8, 50  # 3700 logits: chunks of 5 positions, the last one short


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(entropy, "CHUNK_ELEMENTS", 5 * V)


def entropy_and_grads(make_input, dtype: torch.dtype):
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(B, T, C, dtype=dtype, generator=generator).requires_grad_()
    weight = torch.randn(V, C, dtype=dtype, generator=generator).requires_grad_()
    H = entropy.prediction_entropy(make_input(hidden, weight))
    coefficients = torch.randn(B, T, dtype=H.dtype, generator=generator)
    hidden_grad, weight_grad = torch.autograd.grad((coefficients * H).sum(), (hidden, weight))
    return H, hidden_grad, weight_grad


def logits(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.linear(hidden, weight)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_chunks_of_logits_give_the_plain_values_and_gradients(dtype, monkeypatch):
    plain = entropy_and_grads(logits, dtype)
    monkeypatch.setattr(entropy, "CHUNK_ELEMENTS", 5 * V)
    chunked = entropy_and_grads(logits, dtype)
    for a, b in zip(chunked, plain):  # each row's own operations: bit for bit
        assert torch.equal(a, b)


def test_chunks_of_lm_head_inputs_give_the_plain_values_and_gradients(monkeypatch):
    plain = entropy_and_grads(LmHeadInputs, torch.float64)
    monkeypatch.setattr(entropy, "CHUNK_ELEMENTS", 5 * V)
    chunked = entropy_and_grads(LmHeadInputs, torch.float64)
    for a, b in zip(chunked, plain):
        assert torch.allclose(a, b, rtol=1e-12, atol=0)


def test_chunks_keep_no_full_size_tensor_for_backward(small_chunks):
    """What autograd saves for backward holds the logits and per-position results, never [B, T, V] float32 rows."""
    logits_BTV = torch.randn(B, T, V, dtype=torch.bfloat16, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        entropy.prediction_entropy(logits_BTV)
    assert not [t for t in saved if t.dtype == torch.float32 and t.numel() >= B * T * V // 2]
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        entropy.row_entropy(logits_BTV)  # the plain formula does keep them: the check can see it
    assert [t for t in saved if t.dtype == torch.float32 and t.numel() == B * T * V]
