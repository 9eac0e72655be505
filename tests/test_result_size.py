"""A result larger than its case allows is neither kept nor loaded (issue 49 item 3: a 1 GiB tensor under a real
result name left 3.1 GB in --out and took 3.5 GB of the harness's memory for one invalid result). In-process: the
functions that decide, on the tiny llama's case, with tensors a few MB over what the case has room for."""

from __future__ import annotations

import pytest
import torch

from packcheck.harness.contract import StepResult
from packcheck.harness.engines.caps import tensors_worth_keeping
from packcheck.harness.engines.validate import checkpoint_shapes
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import get_scenario


@pytest.fixture(scope="module")
def case():
    return get_scenario("packed_vs_unpacked").build(setting_for("llama", "float64", "cpu"))["packed"]


def result_of(case, **changes) -> StepResult:
    """A result of the case's shapes (values do not matter here), with `changes`."""
    fields = dict(logprobs=[torch.zeros(len(s.input_ids), dtype=torch.float64) for s in case.samples], loss=1.0,
                  num_loss_tokens=1, grads={n: torch.zeros(shape, dtype=torch.float64) for n, shape in checkpoint_shapes(case.model.checkpoint).items()})
    return StepResult(**(fields | changes))


def test_an_invalid_result_keeps_no_per_token_tensor_of_another_length_than_its_sample(case, tmp_path):
    huge = torch.zeros(1 << 20, dtype=torch.float64)  # 8 MiB under logprobs[0], a real result name
    result = result_of(case)
    result = result_of(case, logprobs=[huge, *result.logprobs[1:]], dloss_dlogprobs=[huge] * (len(case.samples) + 5))
    kept = tensors_worth_keeping(case, result)
    assert kept.logprobs[0].numel() == 0 and kept.logprobs[1:] == result.logprobs[1:]
    assert len(kept.dloss_dlogprobs) == len(case.samples) and all(t.numel() == 0 for t in kept.dloss_dlogprobs)
    assert "logprobs[0]" in kept.notes["packcheck_cap"] and "dloss_dlogprobs[0]" in kept.notes["packcheck_cap"]
    kept.save(tmp_path)
    assert (tmp_path / "result.safetensors").stat().st_size < huge.numel(), "what is saved and copied into --out is the case's size"


def test_a_result_file_larger_than_any_valid_result_of_its_case_is_not_loaded(case, tmp_path):
    from packcheck.harness.engines.result_size import oversized_result, result_bytes_limit

    result_of(case).save(tmp_path / "valid")
    assert oversized_result(tmp_path / "valid" / "result.safetensors", case) is None
    name = next(iter(checkpoint_shapes(case.model.checkpoint)))
    big = torch.zeros(result_bytes_limit(case) // 8 + 1, dtype=torch.float64)  # past the limit under a real gradient name
    result_of(case, grads={name: big}).save(tmp_path / "big")
    said = oversized_result(tmp_path / "big" / "result.safetensors", case)
    assert said is not None and "more than any valid result of this case can" in said and "not loaded" in said, said
