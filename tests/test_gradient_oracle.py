"""The gradient oracle: the weighted log-prob loss in the contract and the reference, the oracle's arms,
what it does with a weight on a document's token 0, and the all-zero-gradient finding.

The mutant it exists for (mutant.logit-grad-tile-softmax) is proven in tests/test_mutants_are_caught.py
(gradient_oracle's `catches`); here: that the mutant passes mask_alignment (the blind spot the oracle closes).
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from packcheck.harness.compare import Arms, compare_tensors, tolerance_for
from packcheck.harness.contract import UNPACKED, Case, ContractError, LossKind, LossSpec, ParallelPlan, Partition, Sample, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.engines import InvalidResult, resolve_engine, validate_result
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.oracle_arms import WEIGHTED, oracle_case
from packcheck.harness.losses import expected_loss
from packcheck.harness.models import model_spec
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import Judgement, get_scenario

TOL = tolerance_for("float64")


@pytest.fixture(scope="module")
def model():
    return model_spec("llama")


def one_case(model, samples, loss=WEIGHTED, layout=UNPACKED):
    return Case(name="t", model=model, samples=samples, layout=layout, partition=Partition.all_in_one(len(samples)), loss=loss)


def weighted(**fields) -> Sample:
    return Sample(**{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "logprob_weights": [0.0, -0.5, 2.0]} | fields)


@pytest.mark.parametrize(("sample", "loss", "message"), [
    (weighted(logprob_weights=None), WEIGHTED,
     r"samples\[0\].logprob_weights is missing: loss.kind 'weighted_logprob_sum' needs the weight of every token's log-prob"),
    (weighted(), LossSpec(), r"samples\[0\].logprob_weights is set but loss.kind is 'sft_token_mean'.*weighted_logprob_sum"),
    (weighted(logprob_weights=[0.0, 1.0]), WEIGHTED, r"samples\[0\].logprob_weights has 2 entries but input_ids has 3"),
    (weighted(logprob_weights=[0.0, float("nan"), 1.0]), WEIGHTED, r"samples\[0\].logprob_weights has non-finite values at tokens \[1\]"),
    (weighted(advantages=1.0), WEIGHTED, r"samples\[0\].advantages is set but loss.kind is 'weighted_logprob_sum'"),
])
def test_malformed_weighted_cases_name_the_field(model, sample, loss, message):
    with pytest.raises(ContractError, match=message):
        one_case(model, [sample], loss)


def test_the_weighted_loss_takes_no_policy_parameter():
    with pytest.raises(ContractError, match=r"loss.clip_low is set but loss.kind is 'weighted_logprob_sum'"):
        LossSpec(kind=LossKind.WEIGHTED_LOGPROB_SUM, clip_low=0.1)


def test_weighted_case_round_trips_and_sft_json_is_unchanged(model):
    case = one_case(model, [weighted()])
    again = Case.from_json(json.loads(json.dumps(case.to_json())))
    assert again == case and again.digest() == case.digest()
    assert "logprob_weights" not in Sample(input_ids=[1, 2], loss_mask=[0, 1]).to_json()


def test_the_reference_backpropagates_exactly_the_given_weights(model):
    """loss = sum w logp with weights on masked tokens too; d loss / d logp = w to the last bit."""
    setting = setting_for("llama", "float64", "cpu")
    samples = samples_for(setting, MIXED_DOCUMENTS)
    generator = torch.Generator().manual_seed(0)
    with_weights = tuple(dataclasses.replace(s, logprob_weights=[0.0, *torch.randn(len(s.input_ids) - 1, generator=generator).tolist()])
                         for s in samples)
    case = arm(setting, "w", with_weights, packed(48), Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8, 9)]), loss=WEIGHTED)
    result = validate_result("reference", case, resolve_engine("reference").run(case))
    assert result.loss == pytest.approx(expected_loss(case, result.logprobs).loss, rel=1e-13)
    for sample, reported in zip(with_weights, result.dloss_dlogprobs):
        assert torch.equal(reported, torch.tensor(sample.logprob_weights, dtype=torch.float64))


@pytest.mark.parametrize("family", ["llama"])  # with the reference's llama cells (conftest.py): its warm world-2 launch
@pytest.mark.parametrize("plan", [ParallelPlan(dp=2), ParallelPlan(cp=2, cp_style="ring")], ids=["dp2", "cp2"])
def test_the_weighted_loss_is_summed_over_ranks_and_shards(run_arm, plan, family):
    """Each rank's and shard's terms sum to the single-process gradient (DP gradients summed, not averaged)."""
    setting = setting_for(family, "float64", "cpu")
    one = arm(setting, "one", samples_for(setting, MIXED_DOCUMENTS), packed(48))
    single = run_arm("reference", one)
    weights = oracle_case(one, single)  # the reference's own SFT weights, as the oracle would give them
    per_rank = Partition(per_rank=(((0, 1, 2, 3),), ((4, 5, 6, 7, 8, 9),))) if plan.dp == 2 else None
    distributed = run_arm("reference", weights.with_(name="mesh", parallel=plan, partition=per_rank or weights.partition))
    rows = compare_tensors(Arms("mesh", "one"), "grad", distributed.grads, run_arm("reference", weights).grads, TOL)
    assert not [r for r in rows if not r.passed], [r.headline() for r in rows if not r.passed][:3]


@pytest.mark.parametrize("bug", ["boundary-label"])  # with the mutant's proof cells (conftest.py): its mask_alignment verdict
def test_the_oracle_follows_a_boundary_weight_in_its_own_layout_and_names_it_elsewhere(run_arm, verdict_of, bug):
    """mutant.boundary-label trains a document's token 0 in a packed row (the previous document predicts it) and
    not unpacked. The oracle arm keeps the layout, puts the weight on the same row position and agrees: the
    backward is right, the token set is not (mask_alignment's finding). The same weights in the unpacked layout,
    where the first position of a document is not a target, have no position to land on: the oracle's weights and
    gradients differ, and the diagnosis names the label across the boundary."""
    scenario = get_scenario("gradient_oracle")
    setting = setting_for("llama", "float64", "cpu")
    cases = scenario.build(setting)
    results = {name: run_arm(f"mutant.{bug}", case) for name, case in cases.items()}
    first_weights = {name: [float(w[0]) for w in r.dloss_dlogprobs] for name, r in results.items()}
    assert any(first_weights["packed"]) and not any(first_weights["unpacked"])
    assert verdict_of(f"mutant.{bug}", "gradient_oracle", "llama").status == "pass"
    assert verdict_of(f"mutant.{bug}", "mask_alignment", "llama").failed

    moved = oracle_case(cases["unpacked"], results["packed"])  # the packed arm's weights, laid out unpacked
    judgement = Judgement(setting=setting, cases={"packed": cases["packed"]}, results={"packed": results["packed"]}, tolerance=TOL,
                          oracle_cases={"packed": moved}, oracle={"packed": run_arm("reference", moved)})
    failed = [c for c in scenario.judge(judgement) if not c.passed]
    assert {c.quantity for c in failed} >= {"dloss_dlogprobs", "grad"}
    assert "a label crosses the packed boundary" in scenario.diagnose(judgement, failed)


@pytest.mark.parametrize("bug", get_scenario("gradient_oracle").catches)  # with the mutant's proof cells (conftest.py)
def test_the_oracle_mutant_passes_mask_alignment(verdict_of, bug):
    """Its forward, loss and weights are exact: the scenario of 'which tokens with which weight' cannot see it."""
    verdict = verdict_of(f"mutant.{bug}", "mask_alignment", "llama")
    assert verdict.status == "pass", verdict.message()
    oracle = verdict_of(f"mutant.{bug}", "gradient_oracle", "llama")
    assert "the backward into the logits disagrees with the dloss_dlogprobs it reports" in oracle.diagnosis


@pytest.mark.parametrize(("bug", "diagnosis"), [  # with each mutant's proof cells (conftest.py)
    ("cross-doc-attention", "the engine's forward differs from the float64 reference's"),
    ("pad-in-loss", "the engine counted more loss tokens than the batch has"),
])
def test_the_oracle_names_the_class_of_what_it_flags(verdict_of, bug, diagnosis):
    """Bugs that are not in the backward fail the oracle too; the diagnosis must not blame the backward."""
    verdict = verdict_of(f"mutant.{bug}", "gradient_oracle", "llama")
    assert verdict.failed and verdict.worst.margin >= 1e6, verdict.message()
    assert verdict.diagnosis.startswith(diagnosis), verdict.diagnosis


def test_an_engine_without_weights_is_unsupported_not_passed(verdict_of):
    verdict = verdict_of("tests.engines.no_weights:ReferenceWithoutWeights", "gradient_oracle", "llama")
    assert verdict.status == "unsupported" and "does not report dloss_dlogprobs" in verdict.detail, verdict.message()


@pytest.mark.slow
def test_a_moe_aux_loss_bug_is_named_as_the_router_term(verdict_of):
    verdict = verdict_of("mutant.moe-router-counts-local", "gradient_oracle", "qwen3_moe")
    assert verdict.failed and verdict.worst.margin >= 1e6, verdict.message()
    assert verdict.diagnosis.startswith("the MoE load-balancing term differs"), verdict.diagnosis


@pytest.fixture(scope="module")
def sft_result():
    setting = setting_for("llama", "float64", "cpu")
    case = arm(setting, "z", samples_for(setting, MIXED_DOCUMENTS), packed(48))
    return case, resolve_engine("reference").run(case)


def zeroed(result):
    return dataclasses.replace(result, grads={name: torch.zeros_like(g) for name, g in result.grads.items()})


def test_a_loss_without_any_gradient_is_a_finding(sft_result):
    case, result = sft_result
    with pytest.raises(InvalidResult, match=r"every gradient is exactly zero while the loss is .* and its own dloss_dlogprobs weighs "
                                            r"\d+ tokens: the backward did not reach the parameters"):
        validate_result("demo", case, zeroed(result))
    weights = oracle_case(case, result)
    with pytest.raises(InvalidResult, match=r"every gradient is exactly zero while the loss is"):
        validate_result("demo", weights, zeroed(dataclasses.replace(result, dloss_dlogprobs=None)))


def test_a_policy_loss_with_every_token_clipped_may_have_no_gradient(sft_result):
    case, result = sft_result
    policy = case.with_(loss=LossSpec(kind="ppo_clip"), samples=tuple(
        dataclasses.replace(s, advantages=1.0, old_logprobs=[0.0] * len(s.input_ids)) for s in case.samples))
    silent = dataclasses.replace(zeroed(result), dloss_dlogprobs=[torch.zeros_like(w) for w in result.dloss_dlogprobs])
    assert validate_result("demo", policy, silent) is silent
