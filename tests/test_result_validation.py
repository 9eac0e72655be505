"""The harness validates every StepResult field and lists every problem with the field path."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from packcheck.harness.contract import Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.engines import InvalidResult, ProblemKind, problems_from_json, problems_json, resolve_engine, validate_result
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for


@pytest.fixture(scope="module")
def case_and_result():
    setting = setting_for("qwen3", "float64", "cpu")
    samples = samples_for(setting, MIXED_DOCUMENTS)
    case = arm(setting, "v", samples, packed(48), Partition.all_in_one(len(samples)))
    return case, resolve_engine("reference").run(case)


def broken(result, **changes):
    return dataclasses.replace(result, **changes)


def test_a_good_result_validates(case_and_result):
    case, result = case_and_result
    assert validate_result("reference", case, result) is result


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: broken(r, logprobs=r.logprobs[:-1]), r"logprobs has 9 entries for 10 samples.*dropped or truncated"),
    (lambda r: broken(r, logprobs=[r.logprobs[0][:-1], *r.logprobs[1:]]), r"logprobs\[0\] has shape \(16,\), expected \(17,\)"),
    (lambda r: broken(r, logprobs=[r.logprobs[0] + 1.0, *r.logprobs[1:]]), r"logprobs\[0\]\[0\] = 1: entry 0 must be 0.0"),
    (lambda r: broken(r, logprobs=[torch.full_like(r.logprobs[0], float("nan")), *r.logprobs[1:]]), r"non-finite"),
    (lambda r: broken(r, loss=float("nan")), r"result.loss is nan"),
    (lambda r: broken(r, num_loss_tokens=3.0), r"num_loss_tokens is 3.0, expected a non-negative int"),
    (lambda r: broken(r, grads={k: v for k, v in r.grads.items() if "lm_head" not in k}), r"grads lacks 1 parameters.*lm_head"),
    (lambda r: broken(r, grads={("_fsdp_wrapped_module." + k): v for k, v in r.grads.items()}), r"strip wrapper prefixes"),
    (lambda r: broken(r, grads={k: v.T if v.dim() == 2 else v for k, v in r.grads.items()}), r"has shape .*expected"),
    (lambda r: broken(r, grads={k: v.long() for k, v in r.grads.items()}), r"expected a floating-point tensor"),
])
def test_each_broken_field_is_named(case_and_result, mutate, message):
    case, result = case_and_result
    with pytest.raises(InvalidResult, match=message):
        validate_result("demo", case, mutate(result))


def test_all_problems_are_listed_at_once(case_and_result):
    case, result = case_and_result
    with pytest.raises(InvalidResult) as info:
        validate_result("demo", case, broken(result, loss=float("inf"), num_loss_tokens=-1))
    assert len(info.value.problems) == 2


def test_each_problem_is_typed_and_travels_as_json(case_and_result):
    """Readers test a problem's kind and field, never its words; invalid.json carries them beside the sentences."""
    case, result = case_and_result
    grads = {k: torch.full_like(v, float("nan")) if k == "lm_head.weight" else v for k, v in result.grads.items()}
    with pytest.raises(InvalidResult) as info:
        validate_result("demo", case, broken(result, loss=float("inf"), num_loss_tokens=3.0, grads=grads))
    loss, count, grad = info.value.problems
    assert (loss.kind, loss.field, loss.sentence) == (ProblemKind.NON_FINITE, "loss", "result.loss is inf, expected a finite float")
    assert (count.kind, count.field) == (ProblemKind.TYPE, "num_loss_tokens")
    n = result.grads["lm_head.weight"].numel()
    assert (grad.kind, grad.field, grad.tensor, grad.count) == (ProblemKind.NON_FINITE, "grads", "lm_head.weight", n)
    assert grad.sentence == f"result.grads['lm_head.weight'] has {n} non-finite values (NaN/inf)"
    assert problems_from_json(json.loads(json.dumps(problems_json(info.value.problems)))) == info.value.problems


def test_a_missing_optimizer_step_is_reported(case_and_result):
    case, result = case_and_result
    from packcheck.harness.contract import OptimizerSpec

    with pytest.raises(InvalidResult, match="params_after is None but the case asks for an optimizer step"):
        validate_result("demo", case.with_(optimizer=OptimizerSpec()), result)


def test_without_values_only_the_finiteness_is_left_to_the_harness(case_and_result):
    """Rank 0 of a CUDA run validates with values=False: NaN gradients pass there, and the harness's full validation
    refuses them with the sentence it always said; every structural problem is still the rank's."""
    case, result = case_and_result
    nan = broken(result, grads={k: torch.full_like(v, float("nan")) if k == "lm_head.weight" else v for k, v in result.grads.items()})
    assert validate_result("demo", case, nan, values=False) is nan
    with pytest.raises(InvalidResult, match=r"result.grads\['lm_head.weight'\] has \d+ non-finite values \(NaN/inf\)"):
        validate_result("demo", case, nan)
    with pytest.raises(InvalidResult, match=r"has shape .*expected"):
        validate_result("demo", case, broken(result, grads={k: v.T if v.dim() == 2 else v for k, v in result.grads.items()}), values=False)
    with pytest.raises(InvalidResult, match=r"result.loss is nan"):
        validate_result("demo", case, broken(result, loss=float("nan")), values=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_sum_of_magnitudes_is_finite_only_when_every_value_is(dtype):
    """finite_at_once's multi-tensor check on a GPU (sums_of_magnitudes), run here on host tensors: NaN or inf anywhere
    makes its tensor's sum not finite; finite values give a finite sum (an overflow would only send the decision to the
    per-tensor checks)."""
    from packcheck.harness.engines.validate import sums_of_magnitudes

    good = [torch.randn(5, 7).to(dtype), torch.randn(3).to(dtype), -torch.ones(1, dtype=dtype)]
    for bad_value in (float("nan"), float("inf"), float("-inf")):
        bad = torch.randn(4, 4).to(dtype)
        bad[2, 3] = bad_value
        finite = [bool(torch.isfinite(s)) for s in sums_of_magnitudes([*good, bad])]
        assert finite == [True, True, True, False]
