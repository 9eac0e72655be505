"""batched_error_sums (a GPU run's comparison: a few kernels per batch of tensors) against error_sums one tensor at a
time, run here on CPU inputs through the same code. The tolerance it is held to: the differences and maxima are the
same float64 values, so max_rel and the worst element's index are equal exactly; the norms sum in another order, so
rel_l2 agrees to 1e-12 relative (float64 rounding over up to ~1e8 terms is far below that)."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.compare import metrics
from packcheck.harness.compare.metrics import batchable, batched_error_sums, error_sums, errors_from_sums

RTOL_L2 = 1e-12


def _pairs(dtype: torch.dtype, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(7,), (3, 5), (64, 33), (1,), (200, 17), (4, 4, 4)]
    pairs = []
    for shape in shapes:
        reference = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
        observed = (reference.double() * (1 + 1e-3 * torch.randn(shape, generator=generator, dtype=torch.float64))).to(dtype)
        pairs.append((observed, reference))
    pairs.append((torch.zeros(3, 3, dtype=dtype), torch.zeros(3, 3, dtype=dtype)))  # both zero: rel 0
    pairs.append((torch.ones(5, dtype=dtype), torch.zeros(5, dtype=dtype)))  # a zero reference: rel inf
    return pairs


def _assert_equivalent(batched: list[float], one: list[float]) -> None:
    l2_b, worst_b, index_b = errors_from_sums(batched)
    l2_o, worst_o, index_o = errors_from_sums(one)
    assert index_b == index_o
    assert worst_b == worst_o
    assert l2_b == pytest.approx(l2_o, rel=RTOL_L2, abs=0.0) or l2_b == l2_o


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_batched_error_sums_match_one_tensor_at_a_time(dtype):
    pairs = _pairs(dtype)
    batched = [s.tolist() for s in batched_error_sums(pairs)]
    for (observed, reference), values in zip(pairs, batched):
        _assert_equivalent(values, error_sums(observed, reference).tolist())


def test_batches_split_and_mixed_dtypes_keep_their_order(monkeypatch):
    """Tensors packed into several batches (a small BATCH_ELEMENTS) and two dtype groups: each sum lands at its own pair."""
    monkeypatch.setattr(metrics, "BATCH_ELEMENTS", 100)
    pairs = _pairs(torch.float32) + _pairs(torch.bfloat16, seed=1)
    pairs.insert(2, (pairs[0][0].double(), pairs[0][1]))  # observed float64 beside a float32 reference: a third group
    batched = batched_error_sums(pairs)
    for (observed, reference), values in zip(pairs, batched):
        _assert_equivalent(values.tolist(), error_sums(observed, reference).tolist())


def test_batched_error_sums_leave_the_inputs_alone():
    pairs = _pairs(torch.float32)
    before = [(a.clone(), b.clone()) for a, b in pairs]
    batched_error_sums(pairs)
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(pairs, before))


def test_only_cuda_results_are_batched():
    """A CPU run's rows stay error_sums' bit for bit: host tensors are never batched, nor empty or mismatched ones."""
    assert not batchable(_pairs(torch.float64))
    if torch.cuda.is_available():
        on_gpu = [(a.cuda(), b.cuda()) for a, b in _pairs(torch.float32)]
        assert batchable(on_gpu)
        assert not batchable(on_gpu + [(torch.zeros(0, device="cuda"), torch.zeros(0, device="cuda"))])
        assert not batchable(on_gpu + [(torch.zeros(2), torch.zeros(2, device="cuda"))])


def test_compare_tensors_rows_through_the_batched_path_match(monkeypatch):
    """compare_tensors' rows (what results.jsonl records) through the batched path, forced here on CPU float32 inputs,
    against the one-tensor-at-a-time path: the same items, metrics and worst elements; rel_l2 within RTOL_L2."""
    from packcheck.harness.compare import Arms, tolerance_for
    from packcheck.harness.compare import arms as arms_module
    from packcheck.harness.compare.arms import compare_tensors

    pairs = _pairs(torch.float32)
    observed = {f"p{i}": a for i, (a, _) in enumerate(pairs)}
    reference = {f"p{i}": b for i, (_, b) in enumerate(pairs)}
    one = compare_tensors(Arms("packed", "unpacked"), "grad", observed, reference, tolerance_for("float32"))
    monkeypatch.setattr(arms_module, "batchable", lambda pairs: True)
    batched = compare_tensors(Arms("packed", "unpacked"), "grad", observed, reference, tolerance_for("float32"))
    assert [(r.item, r.metric, r.where, r.threshold) for r in batched] == [(r.item, r.metric, r.where, r.threshold) for r in one]
    for b, o in zip(batched, one):
        assert b.observed == pytest.approx(o.observed, rel=RTOL_L2, abs=0.0) or b.observed == o.observed
