"""The reference's memory savings for a step too large for its device (impls/reference/step/memory_plan.py): when they
switch on (at 8B on an H200, never at the tiny or 0.6b sizes), and that they compute the same numbers, in float64 on
the CPU: activation checkpointing bit for bit, chunked log-probs within float64 rounding (<= 1e-12 relative).

Negative control: a checkpointing that cuts the graph at each layer's input (a plausible slip: the recomputed layer
gets a detached input) is flagged by the same comparison."""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.launch.device_result import RESULTS_SHARE
from packcheck.harness.models import get_family, model_spec
from packcheck.harness.models.checkpoint import parameter_shapes
from packcheck.harness.models.sizes import PRESETS
from packcheck.harness.scenarios import SCENARIOS, Setting
from packcheck.impls.reference import engine as reference_engine
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.step import memory_plan as mp

H200 = 143771 * 2**20  # torch.cuda.get_device_properties(0).total_memory on the H200 (docs/gpu.md: 143771 MiB)
LARGEST_FORWARD = [(9, 3740)]  # microbatch_invariance's one_unpacked at data scale 85: 33,660 slots, the largest single-process forward
RTOL = 1e-12


def preset_config(family: str, size: str) -> ModelConfig:
    return ModelConfig.from_hf_dict(get_family(family).config(**PRESETS[family][size].overrides))


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_an_8b_step_saves_memory_on_an_h200_and_a_0_6b_or_tiny_step_does_not(family):
    assert mp.memory_plan(preset_config(family, "8b"), 2, H200, LARGEST_FORWARD).saving
    assert mp.memory_plan(preset_config(family, "8b"), 2, H200, [(2, 4080)]).saving, "every 8B arm, its shortest forwards too"
    assert not mp.memory_plan(preset_config(family, "0.6b"), 2, H200, LARGEST_FORWARD).saving, "0.6b ran eager on an H200"
    assert not mp.memory_plan(preset_config(family, "tiny"), 8, 8 * 2**30, [(10, 1000)]).saving


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_a_float64_step_at_0_6b_saves_on_an_h200_for_its_attention_matrices(family):
    """float64 has no fused attention on CUDA: the oracle's 0.6b step on one 4080-token row asked for 116 GiB of an H200
    and failed (docs/gpu.md); in bfloat16 the same forward runs eager."""
    config = preset_config(family, "0.6b")
    assert mp.eager_bytes(config, 8, [(1, 4080)]) > 116 * 2**30
    assert mp.memory_plan(config, 8, H200, [(2, 4080)]).saving
    assert not mp.memory_plan(config, 2, H200, [(2, 4080)]).saving


@pytest.mark.parametrize("family,size", [("llama", "8b"), ("qwen3", "8b"), ("qwen3", "0.6b"), ("llama", "tiny")])
def test_the_parameter_count_is_the_checkpoints(family, size):
    config = get_family(family).config(**PRESETS[family][size].overrides)
    shapes = parameter_shapes(family, config)  # transformers' own class on the meta device
    assert mp.parameter_count(ModelConfig.from_hf_dict(config)) == sum(torch.Size(s).numel() for s in shapes.values())


def test_the_estimate_matches_the_measured_eager_peak_at_0_6b():
    """docs/performance.md: the eager reference arm, 0.6b, 8 x 4096 tokens a step, bf16: 113.5 GiB peak."""
    estimate = mp.eager_bytes(preset_config("qwen3", "0.6b"), 2, [(8, 4096)])
    assert abs(estimate / (113.5 * 2**30) - 1) < 0.1, estimate / 2**30


def test_the_engine_keeps_the_harness_share_of_the_gpu():
    assert mp.HARNESS_SHARE == RESULTS_SHARE, "the engine cannot import the harness's launch: the two must be set together"


def run_model(model: CausalLM, cut: bool = False):
    generator = torch.Generator().manual_seed(0)
    ids_BT = torch.randint(model.config.vocab_size, (2, 11), generator=generator)
    positions_BT = torch.tensor([list(range(4)) + list(range(7)), list(range(1)) + list(range(10))])
    segments_BT = torch.tensor([[0] * 4 + [1] * 7, [0] + [1] * 10])
    model.zero_grad(set_to_none=True)
    if cut:  # the negative control: each layer recomputed from a detached input, so nothing reaches the layers below
        layers = list(model.model.layers)
        for i, layer in enumerate(layers):
            model.model.layers[i] = CutLayer(layer)
    logits = model(ids_BT, positions_BT, segments_BT, "sdpa")
    torch.log_softmax(logits, -1)[..., 0].sum().backward()
    return {n: torch.zeros_like(p) if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}


class CutLayer(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x_BTC, *rest):
        return checkpoint(self.layer, x_BTC.detach().requires_grad_(), *rest, use_reentrant=False)


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_checkpointed_layers_give_the_same_gradients_bit_for_bit(family):
    model = CausalLM.from_checkpoint(model_spec(family).checkpoint, torch.float64)
    plain = run_model(model)
    model.checkpoint_layers = True
    recomputed = run_model(model)
    assert plain.keys() == recomputed.keys()
    assert all(torch.equal(plain[n], recomputed[n]) for n in plain), [n for n in plain if not torch.equal(plain[n], recomputed[n])]
    cut = run_model(CausalLM.from_checkpoint(model_spec(family).checkpoint, torch.float64), cut=True)
    assert not torch.equal(cut["model.embed_tokens.weight"], plain["model.embed_tokens.weight"]), "the negative control is flagged"


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale else (a - b).abs().max().item()


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_the_engine_with_both_savings_gives_the_same_step_in_float64(family, monkeypatch):
    """One packed step through the reference engine with the plan forced on (a device of 1 MB), against the same step
    with nothing saved: loss, log-probs, the weights d loss / d log-prob and every gradient within float64 rounding."""
    setting = Setting(family=family, dtype="float64", device="cpu", model=model_spec(family))
    case = SCENARIOS["gradient_oracle"].build(setting)["packed"]
    assert len(case.samples) == len(MIXED_DOCUMENTS)
    plain = ReferenceEngine().run(case)
    applied = []
    original_apply = mp.MemoryPlan.apply

    def spy(self, model, pipe):
        out = original_apply(self, model, pipe)
        applied.append((self.saving, model.checkpoint_layers, model.lm_head_inputs))
        return out

    monkeypatch.setattr(mp.MemoryPlan, "apply", spy)
    monkeypatch.setattr(reference_engine, "device_bytes", lambda device: 10**6)
    saved = ReferenceEngine().run(case)
    assert applied == [(True, True, True)], applied
    assert abs(saved.loss - plain.loss) <= RTOL * abs(plain.loss) and saved.num_loss_tokens == plain.num_loss_tokens
    for a, b in zip(saved.logprobs, plain.logprobs):
        assert relative(a, b) <= RTOL
    for a, b in zip(saved.dloss_dlogprobs, plain.dloss_dlogprobs):
        assert relative(a, b) <= RTOL
    worst = {n: relative(saved.grads[n], plain.grads[n]) for n in plain.grads}
    assert saved.grads.keys() == plain.grads.keys() and max(worst.values()) <= RTOL, worst
