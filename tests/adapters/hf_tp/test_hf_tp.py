"""hf_tp: transformers' own tensor parallelism (DTensor) on CPU gloo in float64. Its tp2 arms equal its single-process
run, and the collective recorder sees the functional collectives its layers reduce through (the row-parallel outputs'
all_reduces forward, the column-parallel inputs' gradients backward), so tp_vs_notp passes it on its mesh
(`unused_tensor_parallel`)."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.scenarios.tp_vs_notp import build
from packcheck.impls.adapters.hf_tp.engine import HfTensorParallel


@pytest.fixture(scope="module")
def arms(packcheck_inputs):
    return build(packcheck_inputs.setting("llama", "float64", "cpu"))


def test_dp_by_tp_is_declined_with_the_reason(arms):
    engine = HfTensorParallel()
    assert engine.unsupported_reason(arms["tp2"]) is None
    assert "initialize_distributed_mesh" in engine.unsupported_reason(arms["dp2_tp2"])


@pytest.mark.parametrize("name", ["tp2", pytest.param("tp2_unpacked", marks=pytest.mark.slow)])
def test_tp2_arm_equals_the_single_process_run_to_float64_rounding(arms, packcheck_pool, name):
    single = packcheck_pool.run("hf_tp", arms["single"]).result
    outcome = packcheck_pool.run("hf_tp", arms[name])
    assert outcome.status == "ok", outcome.error
    tp = outcome.result
    assert tp.num_loss_tokens == single.num_loss_tokens
    assert abs(tp.loss - single.loss) < 1e-12
    assert max((a - b).abs().max().item() for a, b in zip(tp.logprobs, single.logprobs)) < 1e-12
    for param, grad in single.grads.items():
        assert torch.linalg.norm(tp.grads[param] - grad) <= 1e-12 * torch.linalg.norm(grad), param
    # what the recorder saw on each rank: DTensor's functional all_reduces over the TP pair, forward (the embedding,
    # o_proj and down_proj per layer) and backward (the inputs of q/k/v/gate/up per layer, the lm_head's)
    layers = arms[name].model.config["num_hidden_layers"]
    for log in tp.collectives:
        reductions = [e for e in log if (e["op"], e.get("via"), e["group"]) == ("all_reduce", "_c10d_functional.all_reduce", [0, 1])]
        assert len(reductions) == 1 + 2 * layers + 5 * layers + 1, [e["site"] for e in reductions]
        assert all(e["state"] == "completed" for e in log)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_tp_vs_notp_passes_on_the_mesh_it_was_given(verdict_of, family):
    verdict = verdict_of("hf_tp", "tp_vs_notp", family)
    assert verdict.status == "pass", verdict.message()


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_packed_and_unpacked_rows_agree(verdict_of, family):
    verdict = verdict_of("hf_tp", "packed_vs_unpacked", family)
    assert verdict.status == "pass", verdict.message()
