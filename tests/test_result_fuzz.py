"""Property-based fuzzing of what an engine may return: any mix of broken StepResult fields (shapes,
dtypes, devices, non-finite values, missing and extra keys, wrong types) is an InvalidResult that
names each broken field, never another exception (which would crash the engine's rank instead of
failing its arm with a reason); an intact result always validates."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from packcheck.harness.contract import Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.engines import InvalidResult, Problem, problems_json, resolve_engine, validate_result
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.text import safe_text


@pytest.fixture(scope="module")
def case_and_result():
    setting = setting_for("llama", "float64", "cpu")
    samples = samples_for(setting, MIXED_DOCUMENTS)
    case = arm(setting, "fuzzed", samples, packed(48), Partition.all_in_one(len(samples)))
    return case, resolve_engine("reference").run(case)


ODD_VALUES = st.sampled_from([None, True, "1.5", float("nan"), float("inf"), -1, 2.5, [], {}, object(), torch.tensor(1.0)])
BAD_DTYPES = st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex128])
NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])


def tensor_breakage(data: st.DataObject, t: torch.Tensor) -> object:
    """One way to break a reported tensor."""
    how = data.draw(st.sampled_from(["dtype", "shape", "meta", "non-finite", "not a tensor", "empty"]))
    if how == "dtype":
        return t.to(data.draw(BAD_DTYPES))
    if how == "shape":
        return t.reshape(-1)[:-1] if t.numel() > 1 else t.reshape(1, -1).repeat(2, 1)
    if how == "meta":
        return torch.empty_like(t, device="meta")
    if how == "non-finite":
        broken = t.clone()
        broken.view(-1)[data.draw(st.integers(0, t.numel() - 1))] = data.draw(NON_FINITE)
        return broken
    if how == "not a tensor":
        return data.draw(ODD_VALUES)
    return t.new_empty((0,))


def break_named(data: st.DataObject, tensors: dict) -> object:
    how = data.draw(st.sampled_from(["missing key", "extra key", "renamed key", "broken tensor", "not a dict"]))
    names = sorted(tensors)
    name = data.draw(st.sampled_from(names))
    if how == "missing key":
        return {k: v for k, v in tensors.items() if k != name}
    if how == "extra key":
        return tensors | {data.draw(st.text(min_size=1, max_size=40)) + ".extra": tensors[name]}
    if how == "renamed key":
        return {("module." + k if k == name else k): v for k, v in tensors.items()}
    if how == "broken tensor":
        return tensors | {name: tensor_breakage(data, tensors[name])}
    return data.draw(ODD_VALUES)


def break_per_sample(data: st.DataObject, values: list) -> object:
    how = data.draw(st.sampled_from(["fewer", "more", "broken tensor", "not a list"]))
    if how == "fewer":
        return values[:data.draw(st.integers(0, len(values) - 1))]
    if how == "more":
        return values + values[:1]
    if how == "broken tensor":
        i = data.draw(st.integers(0, len(values) - 1))
        return values[:i] + [tensor_breakage(data, values[i])] + values[i + 1:]
    return data.draw(ODD_VALUES)


BREAKERS = {
    "logprobs": lambda data, r: break_per_sample(data, r.logprobs),
    "dloss_dlogprobs": lambda data, r: break_per_sample(data, r.dloss_dlogprobs),
    "grads": lambda data, r: break_named(data, r.grads),
    "loss": lambda data, r: data.draw(st.one_of(ODD_VALUES, NON_FINITE)),
    "num_loss_tokens": lambda data, r: data.draw(st.sampled_from([-1, 3.0, True, None, "12", float("nan")])),
    "notes": lambda data, r: data.draw(st.sampled_from([{"handle": object()}, {"t": torch.ones(1)}, {("a", 1): 1}, [], None,
                                                        {"x": float("nan") * 0 + 1j}])),
}


@given(data=st.data())
def test_any_broken_result_is_an_invalid_result_naming_each_field(case_and_result, data):
    case, result = case_and_result
    fields = data.draw(st.sets(st.sampled_from(sorted(BREAKERS)), min_size=1, max_size=3))
    changes = {field: BREAKERS[field](data, result) for field in fields}
    if "dloss_dlogprobs" in changes and changes["dloss_dlogprobs"] is None:
        del changes["dloss_dlogprobs"]  # None is allowed there: the field is optional
        if not changes:
            return
    with pytest.raises(InvalidResult) as raised:
        validate_result("fuzzed", case, dataclasses.replace(result, **changes))
    problems = raised.value.problems
    assert problems and all(isinstance(p, Problem) and isinstance(p.sentence, str) for p in problems)
    named = " ".join(p.sentence for p in problems)
    assert any(f"result.{field}" in named for field in changes), (changes.keys(), problems)
    assert {p.field for p in problems} & set(changes), (changes.keys(), problems)
    json.dumps(problems_json([dataclasses.replace(p, sentence=safe_text(p.sentence)) for p in problems]))  # travels to the parent as JSON


@given(what=st.one_of(ODD_VALUES, st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)))
def test_a_run_that_returns_no_step_result_is_invalid(case_and_result, what):
    case, _ = case_and_result
    with pytest.raises(InvalidResult, match="expected packcheck.harness.contract.StepResult"):
        validate_result("fuzzed", case, what)


def test_the_intact_result_validates(case_and_result):
    case, result = case_and_result
    assert validate_result("fuzzed", case, result) is result
