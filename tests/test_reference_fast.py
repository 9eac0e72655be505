"""reference.fast (impls/reference/fast.py) on the CPU is the reference with chunked log-probs: one
step of a packed, two-micro-batch case with a length-1 document gives the reference's loss,
log-probs, upstream weights and every gradient in float64 (<= 1e-12 relative); the whole suite
against it is `packcheck run --engine reference.fast` (the slow test below)."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.contract import Case, Partition, Sample, packed
from packcheck.harness.engines import resolve_engine
from packcheck.harness.models import model_spec
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.fast import ReferenceFast

RTOL = 1e-12


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def test_fast_engine_equals_the_reference_in_float64():
    generator = torch.Generator().manual_seed(3)
    lengths = [9, 1, 16, 5, 12, 7, 3]
    samples = [Sample(input_ids=torch.randint(128, (n,), generator=generator).tolist(), loss_mask=[0] + [1] * (n - 1)) for n in lengths]
    case = Case(name="fast-vs-reference", model=model_spec("llama"), samples=samples, layout=packed(16),
                partition=Partition.single_rank([[0, 1, 2, 3], [4, 5, 6]]))
    assert isinstance(resolve_engine("reference.fast"), ReferenceFast)
    want, got = ReferenceEngine().run(case), ReferenceFast().run(case)
    assert abs(got.loss - want.loss) <= RTOL * abs(want.loss) and got.num_loss_tokens == want.num_loss_tokens
    for name in ("logprobs", "dloss_dlogprobs"):
        for i, (a, b) in enumerate(zip(getattr(got, name), getattr(want, name))):
            assert a.dtype == torch.float64 and relative(a, b) <= RTOL, (name, i)
    assert got.grads.keys() == want.grads.keys()
    worst = {n: relative(got.grads[n], want.grads[n]) for n in want.grads}
    assert max(worst.values()) <= RTOL, worst


@pytest.mark.slow
def test_the_suite_passes_reference_fast(tmp_path):
    from packcheck.harness.cli.main import main

    assert main(["run", "--engine", "reference.fast", "--family", "llama", "--out", str(tmp_path), "--no-report"]) == 0
