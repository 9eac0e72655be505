"""The 'flash' attention backend (impls/reference/model/flash_attention.py) on the CPU in float64, its CUDA
kernels replaced by stand-ins with their signatures (per-document SDPA: impls/adapters/prime_rl/varlen.py
for flash-attn 2, a wrapper of it with flash-attn-4's keywords and (out, lse) return): outputs and
gradients equal the reference's 'sdpa' backend on packed rows with GQA and odd lengths, alone and through
a whole reference step; which package it picks; and the reference engine's refusals where it cannot run."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from packcheck.harness.contract import Case, Partition, Sample, packed
from packcheck.harness.engines import UnsupportedCase
from packcheck.harness.models import model_spec
from packcheck.impls.adapters.prime_rl.varlen import flash_attn_varlen_func as fa2_stand_in
from packcheck.impls.reference.data.rows import positions_and_segments
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model.attention import AttentionBackend, get_attention_backend
from packcheck.impls.reference.model.flash_attention import flash2_call, flash4_call, flash_backend, flash_kernel
from packcheck.impls.reference.model.varlen_attention import cu_seqlens

ROWS = [[1, 7, 13, 2], [23], [5, 5, 3, 1, 9]]  # 23 tokens a row: length-1 documents, a document filling a row
SCALE = 0.3  # not 1/sqrt(head_dim): a kernel left at its default scale differs


def fa4_stand_in(q, k, v, qv=None, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None,
                 min_seqlen_k=None, seqused_q=None, seqused_k=None, gather_kv_indices=None, page_table=None,
                 softmax_scale=None, causal=False, **rest):
    """flash-attn-4's `flash_attn_varlen_func` signature (4.0.0b36: `qv` fourth) over the flash-attn 2 stand-in."""
    assert qv is None and not rest, (qv, rest)
    assert max_seqlen_q == max_seqlen_k == int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())
    out = fa2_stand_in(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=softmax_scale, causal=causal)
    return out, None  # (out, lse)


KERNELS = {"flash-attn-4": flash4_call(fa4_stand_in), "flash-attn 2": flash2_call(fa2_stand_in)}


def qkv(seed: int):
    B, T = len(ROWS), sum(ROWS[0])
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(B, 4, T, 8, dtype=torch.float64, generator=generator)
    k, v = (torch.randn(B, 2, T, 8, dtype=torch.float64, generator=generator) for _ in range(2))  # GQA: 2 kv heads
    return [x.requires_grad_() for x in (q, k, v)]


def attend_with_grads(backend, segment_ids_BT, q, k, v):
    out = backend.attend(q, k, v, backend.build_mask(segment_ids_BT), SCALE)
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    grads = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    return out.detach(), grads


@pytest.mark.parametrize("package", KERNELS)
def test_flash_equals_sdpa_on_packed_rows_with_gqa(package):
    segment_ids_BT = torch.tensor([positions_and_segments(lengths)[1] for lengths in ROWS])
    q, k, v = qkv(0)
    want, want_grads = attend_with_grads(get_attention_backend("sdpa"), segment_ids_BT, q, k, v)
    got, got_grads = attend_with_grads(flash_backend((package, KERNELS[package])), segment_ids_BT, q, k, v)
    assert (got - want).abs().max().item() <= 1e-12
    for name, a, b in zip("qkv", got_grads, want_grads):
        assert (a - b).abs().max().item() <= 1e-12, name


def test_a_kernel_that_sees_one_sequence_per_row_is_caught():
    """The comparison above can fail: cu_seqlens of whole rows (attention across the documents of a row) moves the output."""
    segment_ids_BT = torch.tensor([positions_and_segments(lengths)[1] for lengths in ROWS])
    q, k, v = qkv(0)
    want, _ = attend_with_grads(get_attention_backend("sdpa"), segment_ids_BT, q, k, v)
    rows = AttentionBackend(name="flash", description="one sequence per row", attend=flash_backend(("rows", KERNELS["flash-attn-4"])).attend,
                            build_mask=lambda segment_ids_BT: cu_seqlens(torch.zeros_like(segment_ids_BT)))
    got, _ = attend_with_grads(rows, segment_ids_BT, q, k, v)
    assert (got - want).abs().max().item() > 1e-2


class FlashOnCpu(ReferenceEngine):
    """The reference engine with the 'flash' backend over the flash-attn-4 stand-in, whatever the case asks."""
    name = "reference-flash-stand-in"

    def attention_backend(self, case):
        return flash_backend(("flash-attn-4", KERNELS["flash-attn-4"]))


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_a_reference_step_with_flash_equals_sdpa(family):
    generator = torch.Generator().manual_seed(5)
    lengths = [9, 1, 16, 5, 11, 7, 3]
    samples = [Sample(input_ids=torch.randint(128, (n,), generator=generator).tolist(), loss_mask=[0] + [1] * (n - 1)) for n in lengths]
    case = Case(name="flash-vs-sdpa", model=model_spec(family), samples=samples, layout=packed(17),
                partition=Partition.single_rank([[0, 1, 2, 3], [4, 5, 6]]))
    want, got = ReferenceEngine().run(case), FlashOnCpu().run(case)
    assert abs(got.loss - want.loss) <= 1e-12 * abs(want.loss)
    for a, b in zip(got.logprobs, want.logprobs):
        assert (a - b).abs().max().item() <= 1e-12
    assert got.grads.keys() == want.grads.keys()
    worst = {n: ((got.grads[n] - want.grads[n]).abs().max() / want.grads[n].abs().max()).item() for n in want.grads}
    assert max(worst.values()) <= 1e-12, worst


def packages(monkeypatch, **modules):
    """sys.modules as if exactly `modules` (name -> varlen function) of flash_attn / flash_attn.cute were installed."""
    for name in ("flash_attn", "flash_attn.cute"):
        if name in modules:
            monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(flash_attn_varlen_func=modules[name]))
        else:
            monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError


def test_flash_prefers_flash_attn_4_then_falls_back_to_flash_attn_2(monkeypatch):
    packages(monkeypatch, **{"flash_attn": fa2_stand_in, "flash_attn.cute": fa4_stand_in})
    assert flash_kernel()[0] == "flash-attn-4"
    packages(monkeypatch, flash_attn=fa2_stand_in)
    package, call = flash_kernel()
    assert package == "flash-attn 2" and "flash-attn 2" in flash_backend().description
    cu = torch.tensor([0, 3, 5], dtype=torch.int32)
    x = torch.randn(5, 2, 4, dtype=torch.float64)
    assert torch.equal(call(x, x, x, cu, 3, SCALE), fa2_stand_in(x, x, x, cu, cu, 3, 3, softmax_scale=SCALE, causal=True))


def kernel_case(device: str, dtype: str, attention: str = "flash") -> Case:
    return Case(name="flash", model=model_spec("qwen3"), samples=[Sample(input_ids=[1, 2, 3], loss_mask=[0, 1, 1])],
                layout=packed(4), partition=Partition.single_rank([[0]]), device=device, dtype=dtype, attention=attention)


@pytest.mark.parametrize("attention", ["flash", "varlen"])
def test_the_reference_refuses_kernel_attention_on_the_cpu_and_outside_bfloat16(attention):
    engine = ReferenceEngine()
    reason = engine.unsupported_reason(kernel_case("cpu", "float64", attention))
    assert reason is not None and "CUDA kernel" in reason and "--device cuda" in reason
    with pytest.raises(UnsupportedCase, match="CUDA kernel"):
        engine.run(kernel_case("cpu", "float64", attention))
    reason = engine.unsupported_reason(kernel_case("cuda", "float32", attention))
    assert reason is not None and "bfloat16 only" in reason


def test_the_reference_names_both_packages_where_neither_is_installed(monkeypatch):
    packages(monkeypatch)
    reason = ReferenceEngine().unsupported_reason(kernel_case("cuda", "bfloat16"))
    assert reason is not None and "pip install flash-attn-4" in reason and "flash-attn (2.x" in reason, reason


def test_the_reference_names_the_torch_that_varlen_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.nn.attention.varlen", None)
    reason = ReferenceEngine().unsupported_reason(kernel_case("cuda", "bfloat16", "varlen"))
    assert reason is not None and "torch >= 2.10" in reason, reason


def test_a_release_a_kernel_finding_marks_wrong_is_refused_at_its_head_dims_only(monkeypatch):
    """K1 (harness/engines/kernel_findings.py): flash-attn-4 4.0.0b36 on compute capability 9.0 is refused where the head
    size is one it was measured wrong at, naming the finding and the way out; another release, GPU or head size runs."""
    from packcheck.harness.engines import kernel_findings
    from packcheck.impls.reference.engine import kernel_attention_missing
    from packcheck.impls.reference.model.flash_attention import known_wrong

    packages(monkeypatch, **{"flash_attn": fa2_stand_in, "flash_attn.cute": fa4_stand_in})
    release = {"flash-attn-4": "4.0.0b36"}
    monkeypatch.setattr(kernel_findings, "installed", lambda distribution: release.get(distribution))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *device: (9, 0))
    reason = known_wrong(80, (9, 0))
    assert reason is not None and "K1" in reason and "--attention varlen" in reason and "head dims 8, 16, 40" in reason, reason
    assert known_wrong(128, (9, 0)) is None and known_wrong(80, (10, 0)) is None
    assert known_wrong(88, (9, 0)) is None and known_wrong(144, (9, 0)) is None, "measured right on the H100 (docs/kernels.md)"
    case = kernel_case("cuda", "bfloat16")  # the tiny qwen3: head_dim 16
    assert "K1" in (kernel_attention_missing(case) or ""), "the reference refuses the case instead of computing wrong gradients"
    release["flash-attn-4"] = "4.0.0"
    assert known_wrong(80, (9, 0)) is None and kernel_attention_missing(case) is None, "a release outside the pin runs"
    packages(monkeypatch, flash_attn=fa2_stand_in)
    release["flash-attn-4"] = "4.0.0b36"
    assert kernel_attention_missing(case) is None, "flash-attn 2 is not the release the finding is about"
