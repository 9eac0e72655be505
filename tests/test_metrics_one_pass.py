"""The comparison metrics in one pass (harness/compare/metrics.py, tensor_errors) give the same numbers, bit for bit,
as their definitions (rel_l2, max_rel): verdicts and goldens' margins do not move, the inputs are left as they were."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.compare.metrics import Float64Buffers, max_rel, rel_l2, tensor_errors


def pairs():
    generator = torch.Generator().manual_seed(17)
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        reference = torch.randn(37, 29, generator=generator, dtype=torch.float64).to(dtype)
        observed = (reference.double() * (1 + 1e-6 * torch.randn(37, 29, generator=generator, dtype=torch.float64))).to(dtype)
        yield f"{dtype}", observed, reference, None
        yield f"{dtype}-weighted", observed, reference, 1 + torch.rand(37, 29, generator=generator, dtype=torch.float64)
        yield f"{dtype}-equal", reference.clone(), reference, None
    yield "zero-reference", torch.ones(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64), None
    yield "both-zero", torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64), None
    yield "empty", torch.zeros(0, 3, dtype=torch.float64), torch.zeros(0, 3, dtype=torch.float64), None
    yield "negative-peak", torch.tensor([1.0, -7.0, 2.0], dtype=torch.float64), torch.tensor([1.0, -8.0, 2.5], dtype=torch.float64), None


@pytest.mark.parametrize("name, observed, reference, weights", list(pairs()), ids=[p[0] for p in pairs()])
def test_one_pass_equals_the_definitions_bit_for_bit(name, observed, reference, weights):
    before = (observed.clone(), reference.clone())
    l2, worst, index = tensor_errors(observed, reference, weights)
    assert (l2, (worst, index)) == (rel_l2(observed, reference, weights), max_rel(observed, reference, weights))
    assert torch.equal(observed, before[0]) and torch.equal(reference, before[1]), "the caller's tensors are not changed"


def test_buffers_shared_across_tensors_of_any_size_and_layout_give_the_same_numbers():
    buffers = Float64Buffers()
    cases = list(pairs())
    cases += [(f"{name}-transposed", observed.t(), reference.t(), None if weights is None else weights.t())
              for name, observed, reference, weights in cases if observed.dim() == 2]
    for name, observed, reference, weights in cases + cases[::-1]:  # growing and shrinking
        before = (observed.clone(), reference.clone())
        got = tensor_errors(observed, reference, weights, buffers)
        assert (got[0], got[1:]) == (rel_l2(observed, reference, weights), max_rel(observed, reference, weights)), name
        assert torch.equal(observed, before[0]) and torch.equal(reference, before[1]), name
