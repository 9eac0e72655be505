"""Token-budget micro-batching (harness/contract/token_budget.py): the contract refuses a malformed budget naming the
field and the fix, leaves every case without one serialised as before, and the reference's empty micro-batches (what
equalises the micro-step count over the data-parallel ranks) change no bit of a step's numbers."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from packcheck.harness.contract import Case, ContractError, ParallelPlan, Partition, Sample, TokenBudget, packed
from packcheck.harness.engines import Capabilities
from packcheck.harness.golden.store import golden_path
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import SCENARIOS
from packcheck.harness.scenarios.token_skew_collectives import SKEWED
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


@pytest.fixture(scope="module")
def model():
    return setting_for("llama", "float64", "cpu").model


def budget_case(model, lengths, per_rank, max_tokens=8, **fields) -> Case:
    samples = [Sample(input_ids=[1] * n, loss_mask=[0] + [1] * (n - 1)) for n in lengths]
    return Case(name="t", model=model, samples=samples, layout=packed(16), partition=Partition(per_rank=per_rank),
                token_budget=TokenBudget(max_tokens=max_tokens), **fields)


def skewed_arm(family: str) -> Case:
    return SCENARIOS["token_skew_collectives"].build(setting_for(family, "float64", "cpu"))[SKEWED]


@pytest.mark.parametrize(("lengths", "per_rank", "max_tokens", "message"), [
    ((3, 4), (((0,), (1,)),), 8, r"per_rank\[0\] holds 2 micro-batches; give each rank one group, its samples"),
    ((3, 9), (((0, 1),),), 8, r"samples \[1\] are longer than token_budget.max_tokens=8; a sample is never split.*raise max_tokens"),
    ((3,), (((0,),),), 0, r"token_budget.max_tokens is 0: .*a positive int"),
    ((3,), (((0,),),), True, r"token_budget.max_tokens is True"),
])
def test_a_malformed_budget_names_the_field_and_the_fix(model, lengths, per_rank, max_tokens, message):
    with pytest.raises(ContractError, match=message):
        budget_case(model, lengths, per_rank, max_tokens)


def test_a_case_without_a_budget_serialises_as_before(model):
    """The stored golden case (written before budgets existed) reads back to the same JSON; a budget is in the JSON and
    the digest only where set."""
    data = json.loads((golden_path("llama") / "case.json").read_text())
    assert Case.from_json(data).to_json() == data
    case = budget_case(model, (3, 4, 5), (((0, 1, 2),),))
    assert Case.from_json(case.to_json()) == case
    assert "token_budget" not in case.with_(token_budget=None).to_json()
    assert case.digest() != case.with_(token_budget=None).digest()


def test_the_in_order_cut_keeps_the_budget_and_never_splits_a_sample(model):
    assert TokenBudget(max_tokens=8).cut_in_order([5, 3, 1, 7, 8, 2]) == [[0, 1], [2, 3], [4], [5]]
    case = budget_case(model, (5, 3, 1, 7, 8, 2), (((0, 1, 2),), ((3, 4, 5),)), parallel=ParallelPlan(dp=2))
    assert case.micro_batches_by_rank == (((0, 1), (2,)), ((3,), (4,), (5,)))


def test_the_scenario_skews_tokens_tenfold_and_needs_truly_empty_micro_batches():
    """token_skew_collectives' skewed arm as its docstring says: rank 1 holds ten times rank 0's tokens; rank 0's cut is
    one micro-batch and rank 1's three, and rank 0 has fewer samples than that, so only empty micro-batches equalise."""
    case = skewed_arm("llama")
    assert [sum(len(case.samples[i].input_ids) for i in group) for (group,) in case.partition.per_rank] == [13, 130]
    assert [len(cut) for cut in case.micro_batches_by_rank] == [1, 3]
    assert len(case.partition.per_rank[0][0]) < 3


def test_an_engine_that_does_not_declare_it_declines_a_budget_case(model):
    reason = Capabilities(families=frozenset({"llama"})).unsupported_reason(budget_case(model, (3, 4), (((0, 1),),)))
    assert "token-budget micro-batching" in reason and "Capabilities(token_budget=True)" in reason


class TwoEmptyMicroBatches(ReferenceEngine):
    """The reference running two empty micro-batches after its cut, as a rank that needs fewer micro-steps than its
    peers does."""

    pipeline = dataclasses.replace(REFERENCE, micro_steps=lambda local_steps, mesh: local_steps + 2)


@pytest.mark.parametrize("family", ["llama", pytest.param("qwen2_5_vl", marks=pytest.mark.slow)])  # the VLM: 4.6 s on 2 cores
def test_empty_micro_batches_change_no_bit(family):
    """The reference's empty micro-batch (one row of padding; a VLM's tower runs on its dummy image) contributes
    exactly zero: loss, count, log-probs and every gradient bit for bit as without it (single process, the skewed
    arm's samples cut by its budget)."""
    skewed = skewed_arm(family)
    case = skewed.with_(parallel=ParallelPlan(), partition=Partition.single_rank([range(len(skewed.samples))]))
    plain, padded = ReferenceEngine().run(case), TwoEmptyMicroBatches().run(case)
    assert padded.loss == plain.loss and padded.num_loss_tokens == plain.num_loss_tokens
    assert all(torch.equal(a, b) for a, b in zip(padded.logprobs, plain.logprobs, strict=True))
    assert plain.grads.keys() == padded.grads.keys()
    assert all(torch.equal(padded.grads[name], plain.grads[name]) for name in plain.grads)
