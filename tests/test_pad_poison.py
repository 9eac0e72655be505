"""Case.pad_poison (harness/contract/pad_poison.py) and the helper engines write it with (harness/engines/pad_poison.py):
a malformed request is refused naming the field and the fix; cases without it serialise as before; the helper writes
NaN / +Inf at pads, the canary's row and finite garbage upstream, each with an exact zero backward where it wrote;
the chunked log-prob (reference.fast) applies it as the plain one does; an engine without the capability says why."""

from __future__ import annotations

import json
import math

import pytest
import torch

from packcheck.harness.contract import CANARY_LOGIT, UNPACKED, Case, ContractError, LossSpec, PadPoison, Partition, Sample, canary_logprob
from packcheck.harness.engines import Capabilities
from packcheck.harness.engines.pad_poison import GARBAGE, PadPoisoner
from packcheck.harness.models import model_spec

SAMPLES = (Sample(input_ids=[1, 2, 3, 4], loss_mask=[0, 0, 1, 1]), Sample(input_ids=[5, 6], loss_mask=[0, 1]))


@pytest.fixture(scope="module")
def model():
    return model_spec("llama")


def case(model, **fields) -> Case:
    return Case(name="t", model=model, samples=SAMPLES, layout=UNPACKED, partition=Partition.all_in_one(len(SAMPLES)), **fields)


@pytest.mark.parametrize(("canary", "message"), [
    ((2, 1), r"pad_poison.canary names sample 2, but the case has samples 0..1"),
    ((0, 0), r"pad_poison.canary names token 0 of sample 0 \(length 4\): use a token 1..length-1"),
    ((1, 2), r"pad_poison.canary names token 2 of sample 1 \(length 2\)"),
    ((0, 2), r"pad_poison.canary \(0, 2\) is a loss target: choose a token whose loss_mask is 0"),
])
def test_a_malformed_canary_names_the_field_and_the_fix(model, canary, message):
    with pytest.raises(ContractError, match=message):
        case(model, pad_poison=PadPoison(canary=canary))


def test_the_weighted_loss_refuses_poisoned_pads(model):
    weighted = tuple(Sample(input_ids=s.input_ids, loss_mask=s.loss_mask, logprob_weights=[0.5] * len(s.input_ids)) for s in SAMPLES)
    with pytest.raises(ContractError, match=r"pad_poison with a weighted_logprob_sum loss: .*drop pad_poison or use another loss"):
        Case(name="t", model=model, samples=weighted, layout=UNPACKED, partition=Partition.all_in_one(2),
             loss=LossSpec(kind="weighted_logprob_sum"), pad_poison=PadPoison(canary=(0, 1)))


def test_a_request_round_trips_and_a_case_without_one_serialises_as_before(model):
    plain, poisoned = case(model), case(model, pad_poison=PadPoison(canary=(0, 1)))
    assert "pad_poison" not in plain.to_json() and "pad_poison(canary=sample 0 token 1)" in poisoned.describe()
    again = Case.from_json(json.loads(json.dumps(poisoned.to_json())))
    assert again == poisoned and again.pad_poison.canary == (0, 1) and again.digest() == poisoned.digest() != plain.digest()
    assert Case.from_json(json.loads(json.dumps(plain.to_json()))).digest() == plain.digest()


def test_an_engine_without_the_capability_declines_and_says_why(model):
    reason = Capabilities(families=frozenset({"llama"})).unsupported_reason(case(model, pad_poison=PadPoison(canary=(0, 1))))
    assert "pad poisoning" in reason and "Capabilities(pad_poison=True)" in reason and "harness/engines/pad_poison.py" in reason
    old = Capabilities(families=frozenset({"llama"})).to_json()
    del old["pad_poison"]  # a description written before the capability existed
    assert Capabilities.from_json(old).pad_poison is False


# two rows: [pad, (0,0), (0,1), (0,2), (0,3)] and [(1,0), (1,1), pad, pad, pad]; the canary (0, 2) is predicted at (0, 1)
SAMPLE_BT = torch.tensor([[-1, 0, 0, 0, 0], [1, 1, -1, -1, -1]])
TOKEN_BT = torch.tensor([[-1, 0, 1, 2, 3], [0, 1, -1, -1, -1]])
PAD_BT = SAMPLE_BT < 0
CANARY_BT = torch.zeros_like(PAD_BT)
CANARY_BT[0, 2] = True


def test_logits_get_nan_and_inf_at_pads_the_canary_row_and_an_exact_zero_backward_there():
    poisoner = PadPoisoner(PadPoison(canary=(0, 2)))
    logits_BTV = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    out = poisoner.logits(logits_BTV, SAMPLE_BT, TOKEN_BT)
    assert out[PAD_BT][:, 0::2].isnan().all() and (out[PAD_BT][:, 1::2] == math.inf).all()
    assert out[CANARY_BT].tolist() == [[CANARY_LOGIT, 0, 0, 0, 0, 0]]
    assert torch.equal(out[~PAD_BT & ~CANARY_BT], logits_BTV[~PAD_BT & ~CANARY_BT])
    assert torch.equal(poisoner.overwritten(SAMPLE_BT, TOKEN_BT), PAD_BT | CANARY_BT)
    lp_BTV = torch.log_softmax(out, -1)
    assert [lp_BTV[0, 2, v].item() for v in (0, 3)] == pytest.approx([canary_logprob(6, 0), canary_logprob(6, 3)], abs=1e-13)
    assert canary_logprob(6, 3) == pytest.approx(-CANARY_LOGIT, abs=1e-11)
    lp_BT = lp_BTV[..., 0]
    torch.where(PAD_BT, 0.0, lp_BT).sum().backward()
    assert logits_BTV.grad.isfinite().all() and (logits_BTV.grad[PAD_BT | CANARY_BT] == 0).all()
    assert (logits_BTV.grad[~PAD_BT & ~CANARY_BT] != 0).any()


def test_hidden_and_router_garbage_is_finite_large_and_only_at_pads():
    poisoner = PadPoisoner(PadPoison(canary=(0, 2)))
    x_BTC = torch.randn(2, 5, 8, dtype=torch.bfloat16, requires_grad=True)
    out = poisoner.hidden(x_BTC, SAMPLE_BT)
    assert out.isfinite().all() and out[PAD_BT].abs().max().item() == pytest.approx(GARBAGE, rel=1e-2)
    assert torch.equal(out[~PAD_BT], x_BTC[~PAD_BT])
    out.float().sum().backward()
    assert (x_BTC.grad[PAD_BT] == 0).all() and (x_BTC.grad[~PAD_BT] == 1).all()
    router_NE = poisoner.router_logits(torch.zeros(10, 4, dtype=torch.float64), SAMPLE_BT.reshape(-1))
    assert router_NE[PAD_BT.reshape(-1)].abs().max().item() == GARBAGE and (router_NE[~PAD_BT.reshape(-1)] == 0).all()


@pytest.mark.parametrize("family", ["llama", pytest.param("qwen3_moe", marks=pytest.mark.slow)])  # the router's garbage: slow
def test_the_chunked_log_prob_applies_the_poison_as_the_plain_one_does(family):
    """reference.fast's log-probs a chunk of rows at a time, the overwrite included: equal to the plain path in float64,
    log-probs and every gradient, with NaN and +Inf at pads the chunk's backward must zero."""
    from packcheck.harness.scenarios import SCENARIOS
    from packcheck.harness.run.scenario_runner import setting_for
    from packcheck.impls.reference.engine import ReferenceEngine
    from packcheck.impls.reference.fast import ReferenceFast

    poisoned = SCENARIOS["poisoned_pads"].build(setting_for(family, "float64", "cpu"))["unpacked_left_poisoned"]
    plain, chunked = ReferenceEngine().run(poisoned), ReferenceFast().run(poisoned)
    sample, token = poisoned.pad_poison.canary
    label = poisoned.samples[sample].input_ids[token]
    assert chunked.logprobs[sample][token].item() == pytest.approx(canary_logprob(poisoned.model.vocab_size, label), abs=1e-14)
    assert max((a - b).abs().max().item() for a, b in zip(plain.logprobs, chunked.logprobs)) < 1e-12
    for name, g in plain.grads.items():
        assert chunked.grads[name].isfinite().all() and (chunked.grads[name] - g).norm() <= 1e-12 * g.norm(), name
