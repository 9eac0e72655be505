"""Adapter-specific checks of verl_fsdp with the real verl engine (float32, CPU, one process).

The conformance suite judges verl through scenarios; these pin what the adapter itself claims:
the CPU platform is the one verl uses, the translation of verl's rolled per-row outputs back to
samples (including where a label crosses a sample boundary), the inert rows that fill uneven
micro-batches, the tokenizer that must not add a padding row, and the declared limits.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from packcheck.harness.contract import UNPACKED, Case, Layout, LayoutKind, OptimizerSpec, Partition, Sample, packed
from packcheck.harness.engines import UnsupportedCase
from packcheck.harness.models import model_spec

pytest.importorskip("verl", reason="needs the verl extra: pip install -e '.[test,verl]' -c constraints/cpu-torch.txt")
logging.getLogger("verl").setLevel(logging.WARNING)

from packcheck.impls.adapters.verl_fsdp import cpu_platform  # noqa: E402
from packcheck.impls.adapters.verl_fsdp.engine import VerlFSDP  # noqa: E402
from packcheck.impls.adapters.verl_fsdp.variants import VerlFSDPEosPadEmbedding, VerlFSDPPretrainMask  # noqa: E402
from packcheck.impls.reference.engine import ReferenceEngine  # noqa: E402

# token 0 appears as an input inside samples 0 and 2: its embedding row must be trained like any other
SAMPLES = (
    Sample(input_ids=(5, 0, 9, 3, 7, 11), loss_mask=(0, 1, 1, 1, 1, 1)),
    Sample(input_ids=(4, 8, 2), loss_mask=(0, 0, 1)),
    Sample(input_ids=(6, 1, 0, 13, 2, 17, 3), loss_mask=(0, 1, 1, 1, 1, 1, 1)),
    Sample(input_ids=(12, 14), loss_mask=(0, 1)),
)


def case(family="llama", layout=None, partition=None, samples=SAMPLES, **fields) -> Case:
    return Case(name="t", model=model_spec(family), samples=samples, layout=layout or packed(24),
                partition=partition or Partition.all_in_one(len(samples)), dtype="float32", device="cpu", **fields)


@pytest.fixture(scope="module")
def verl():
    return VerlFSDP()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_verl_runs_on_the_cpu_platform_over_gloo():
    cpu_platform.install()
    from verl.utils.device import get_device_name, get_nccl_backend

    assert (get_device_name(), get_nccl_backend()) == ("cpu", "gloo")


@pytest.mark.parametrize("family", ["llama", "qwen3"])
@pytest.mark.parametrize("layout", [packed(24), UNPACKED], ids=["packed", "unpacked"])
def test_matches_the_reference_token_by_token_and_tensor_by_tensor(verl, family, layout):
    c = case(family, layout, Partition.single_rank([(0, 1), (2, 3)]))
    got, want = verl.run(c), ReferenceEngine().run(c)
    for i, (a, b) in enumerate(zip(got.logprobs, want.logprobs)):
        assert (a - b).abs().max() < 1e-5, f"sample {i}: {a} vs {b}"
    assert got.num_loss_tokens == sum(s.num_targets for s in SAMPLES)
    assert abs(got.loss - want.loss) < 1e-5 * abs(want.loss)
    worst = max(rel(got.grads[n], want.grads[n]) for n in want.grads)
    assert worst < 1e-5, worst
    embed = "model.embed_tokens.weight"
    assert (got.grads[embed][0] - want.grads[embed][0]).abs().max() < 1e-6, "token 0's embedding row is not trained as the reference trains it"


def test_uneven_micro_batches_are_filled_with_inert_rows_that_change_nothing(verl):
    one = verl.run(case())
    uneven = verl.run(case(partition=Partition.single_rank([(3,), (2, 0, 1)])))
    assert uneven.notes["micro_batch_size_per_gpu"] == 3  # the first micro-batch got two inert rows
    assert uneven.num_loss_tokens == one.num_loss_tokens
    assert abs(uneven.loss - one.loss) < 1e-6 * abs(one.loss)
    assert max(rel(uneven.grads[n], one.grads[n]) for n in one.grads) < 1e-5


def test_optimizer_step_is_the_contract_adamw(verl):
    spec = OptimizerSpec()
    c = case(optimizer=spec)
    got, want = verl.run(c), ReferenceEngine().run(c)
    assert max(rel(got.params_after[n], want.params_after[n]) for n in want.params_after) < 1e-5


def test_a_label_across_the_boundary_lands_on_entry_zero_of_the_sample_it_predicts():
    """The all-ones variant trains each row's last position on the next row's token 0 (the last row wraps
    to the first): the weight must appear as that sample's dloss_dlogprobs[0], and the count grows by one."""
    samples = (SAMPLES[0], SAMPLES[2], SAMPLES[3])  # all fully supervised: each gets loss_mask[0] = 1 in verl
    got = VerlFSDPPretrainMask().run(case(samples=samples))
    harness_count = sum(s.num_targets for s in samples)
    assert got.num_loss_tokens == harness_count + len(samples)
    for i, w in enumerate(got.dloss_dlogprobs):
        assert w[0] == pytest.approx(-1.0 / got.num_loss_tokens, rel=1e-6), f"sample {i}: entry 0 weight {w[0]}"


def test_the_main_adapter_never_weights_entry_zero(verl):
    got = verl.run(case())
    assert all(w[0].item() == 0.0 for w in got.dloss_dlogprobs)
    count = got.num_loss_tokens
    for w, s in zip(got.dloss_dlogprobs, SAMPLES):
        assert torch.allclose(w, torch.tensor(s.loss_mask, dtype=w.dtype) * (-1.0 / count), rtol=1e-6, atol=0)


@pytest.mark.parametrize("refused", [
    dict(dtype="float64"),
    dict(layout=Layout(kind=LayoutKind.UNPACKED, padding_side="left")),
    dict(layout=Layout(kind=LayoutKind.STACKED)),
], ids=["float64", "left-padded-rows", "stacked"])
def test_refuses_what_verl_cannot_express(verl, refused):
    c = dataclasses.replace(case(), **refused)
    with pytest.raises(UnsupportedCase):
        verl.run(c)


def test_eos_pad_variant_freezes_the_eos_embedding_row():
    """verl's pad = eos, copied into the model config as padding_idx: token 0 (the variant's eos) occurs as an
    input in SAMPLES, the reference trains its row, verl's embedding gives it exactly zero gradient."""
    c = case()
    got, want = VerlFSDPEosPadEmbedding().run(c), ReferenceEngine().run(c)
    embed = "model.embed_tokens.weight"
    assert want.grads[embed][0].abs().max() > 1e-3
    assert got.grads[embed][0].abs().max() == 0.0
    assert rel(got.grads[embed][1:], want.grads[embed][1:]) < 1e-5  # every other row as the reference


def test_policy_loss_weights_are_the_contract_s(verl):
    """verl's ppo_loss through the adapter: token-mean weights -A r / N on unclipped tokens, 0 off the mask."""
    from packcheck.harness.contract import LossSpec

    samples = tuple(Sample(input_ids=s.input_ids, loss_mask=s.loss_mask, advantages=0.5 - i, old_logprobs=(-5.0,) * len(s.input_ids))
                    for i, s in enumerate(SAMPLES))
    c = case(samples=samples, loss=LossSpec(kind="ppo_clip", clip_low=0.2, clip_high=1e6),
             partition=Partition.single_rank([(0, 1), (2, 3)]))
    got = verl.run(c)
    n = sum(s.num_targets for s in samples)
    assert got.num_loss_tokens == n
    for i, (s, lp, w) in enumerate(zip(samples, got.logprobs, got.dloss_dlogprobs)):
        ratio = (lp.double() + 5.0).exp()
        expected = torch.tensor(s.loss_mask, dtype=torch.float64) * (-s.advantages) * ratio / n
        if s.advantages < 0:  # the pessimistic bound takes the clipped branch below 1 - clip_low: weight 0
            expected[ratio < 0.8] = 0.0
        assert torch.allclose(w.double(), expected, rtol=1e-4, atol=1e-7), f"sample {i}: {w} vs {expected}"
