"""The chunked log-prob (impls/reference/loss/chunked_logprobs.py) equals the plain path (lm_head, log_softmax,
gather) in float64: log-probs, loss and every gradient to <= 1e-12 relative, for chunks that do and do
not divide the token count; and through the tiny model, whose forward then returns LmHeadInputs."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.models import model_spec
from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.loss.chunked_logprobs import chunk_tokens, chunked_label_logprobs
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs

RTOL = 1e-12


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()


def loss_and_grads(head: LmHeadInputs, label_BT: torch.Tensor, weight_BT: torch.Tensor, chunk: int | None):
    lp_BT = label_logprobs(head.logits(), label_BT) if chunk is None else chunked_label_logprobs(head, label_BT, chunk)
    loss = -(lp_BT * weight_BT).sum()
    dh, dw = torch.autograd.grad(loss, [head.hidden_BTC, head.weight_VC])
    return lp_BT.detach(), loss.detach(), dh, dw


@pytest.mark.parametrize("chunk", [1, 5, 13, 26, 1000])
def test_chunked_equals_plain_in_float64(chunk):
    generator = torch.Generator().manual_seed(chunk)
    B, T, C, V = 2, 13, 8, 37
    hidden_BTC = torch.randn(B, T, C, dtype=torch.float64, generator=generator, requires_grad=True)
    weight_VC = torch.randn(V, C, dtype=torch.float64, generator=generator, requires_grad=True)
    label_BT = torch.randint(V, (B, T), generator=generator)
    weight_BT = torch.rand(B, T, dtype=torch.float64, generator=generator)  # as a loss mask times token weight, any values
    head = LmHeadInputs(hidden_BTC, weight_VC)
    plain, chunked = loss_and_grads(head, label_BT, weight_BT, None), loss_and_grads(head, label_BT, weight_BT, chunk)
    for name, want, got in zip(("log-probs", "loss", "d hidden", "d lm_head"), plain, chunked):
        assert got.dtype == torch.float64 and got.shape == want.shape, name
        assert relative(got, want) <= RTOL, f"{name}: {relative(got, want):.3g} relative with chunk {chunk}"


def test_chunk_size_bounds_the_logits():
    assert chunk_tokens(151936) == 3456 and chunk_tokens(128256) == 4096 and chunk_tokens(128) == 2**22
    assert chunk_tokens(2**29) == 1 and chunk_tokens(2**23) == 64


def test_the_tiny_model_with_chunked_logprobs_equals_the_plain_model():
    spec = model_spec("llama")
    model = CausalLM.from_checkpoint(spec.checkpoint, torch.float64)
    generator = torch.Generator().manual_seed(0)
    input_ids_BT = torch.randint(model.config.vocab_size, (2, 11), generator=generator)
    position_ids_BT = torch.tensor([list(range(4)) + list(range(7)), list(range(1)) + list(range(10))])
    segment_ids_BT = torch.tensor([[0] * 4 + [1] * 7, [0] + [1] * 10])
    label_BT = torch.randint(model.config.vocab_size, (2, 11), generator=generator)

    def run(chunked: bool):
        model.zero_grad(set_to_none=True)
        model.lm_head_inputs = chunked
        out = model(input_ids_BT, position_ids_BT, segment_ids_BT, "sdpa")
        assert isinstance(out, LmHeadInputs) == chunked
        lp_BT = chunked_label_logprobs(out, label_BT, chunk=3) if chunked else label_logprobs(out, label_BT)
        loss = -lp_BT.sum() / lp_BT.numel()
        loss.backward()
        return lp_BT.detach(), loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    (lp_plain, loss_plain, grads_plain), (lp_fast, loss_fast, grads_fast) = run(False), run(True)
    assert relative(lp_fast, lp_plain) <= RTOL and relative(loss_fast, loss_plain) <= RTOL
    assert grads_fast.keys() == grads_plain.keys()
    worst = {n: relative(grads_fast[n], grads_plain[n]) for n in grads_plain}
    assert max(worst.values()) <= RTOL, worst
