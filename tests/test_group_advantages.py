"""Advantages an engine estimates from rewards and groups (LossSpec.advantage): the contract refuses what cannot be
meant and naming the field, keeps every older case's JSON, and the harness's and the reference's estimators agree with
a hand computation and depend on group membership only."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from packcheck.harness.contract import UNPACKED, AdvantageEstimator, Case, ContractError, LossKind, LossSpec, Partition, Sample
from packcheck.harness.engines import Capabilities, InvalidResult, resolve_engine, validate_result
from packcheck.harness.losses import group_advantages
from packcheck.harness.models import model_spec
from packcheck.impls.reference.loss.advantages import normalised

GRPO = LossSpec(kind="ppo_clip", advantage="grpo")
DR_GRPO = LossSpec(kind="ppo_clip", advantage="dr-grpo")


@pytest.fixture(scope="module")
def model():
    return model_spec("llama")


def case(model, samples, loss=GRPO):
    return Case(name="t", model=model, samples=samples, layout=UNPACKED, partition=Partition.all_in_one(len(samples)), loss=loss)


def grouped(reward=1.0, group=0, **fields) -> Sample:
    return Sample(**{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "old_logprobs": [0.0, -1.0, -2.0], "reward": reward,
                     "group": group} | fields)


@pytest.mark.parametrize(("sample", "loss", "message"), [
    (grouped(reward=float("nan")), GRPO, r"samples\[0\].reward is nan: the sample's scalar reward, a finite float"),
    (grouped(group=-1), GRPO, r"samples\[0\].group is -1: the id of the sample's group .* an integer in \[0, 2\*\*53\)"),
    (grouped(group=1.5), GRPO, r"samples\[0\].group is 1.5"),
    (grouped(group=True), GRPO, r"samples\[0\].group is True"),
    (grouped(group=None), GRPO, r"samples\[0\].group is missing: loss.advantage 'grpo' needs the id of the sample's group"),
    (grouped(reward=None), DR_GRPO, r"samples\[0\].reward is missing: loss.advantage 'dr-grpo' needs the sample's scalar reward"),
    (grouped(advantages=0.5), GRPO, r"samples\[0\].advantages is set but loss.advantage='grpo' computes every sample's advantage"),
    (grouped(advantages=0.5), LossSpec(kind="ppo_clip"), r"samples\[0\].reward is set but loss.advantage is None"),
    (grouped(), LossSpec(), r"samples\[0\].old_logprobs is set but loss.kind is 'sft_token_mean'"),
    (Sample(input_ids=[1, 2], loss_mask=[0, 1], group=3), LossSpec(), r"samples\[0\].group is set but loss.kind is 'sft_token_mean'"),
])
def test_malformed_estimator_cases_name_the_field(model, sample, loss, message):
    with pytest.raises(ContractError, match=message):
        case(model, [sample], loss)


@pytest.mark.parametrize(("fields", "message"), [
    (dict(advantage="grpo"), r"loss.advantage is set but loss.kind is 'sft_token_mean'"),
    (dict(kind="ppo_clip", advantage="gae"), r"loss.advantage='gae' is not an estimator: use one of \['grpo', 'dr-grpo'\]"),
])
def test_malformed_estimator_specs_name_the_field(fields, message):
    with pytest.raises(ContractError, match=message):
        LossSpec(**fields)


def test_estimator_cases_round_trip_and_older_cases_keep_their_json(model):
    original = case(model, [grouped(1.0, 4), grouped(0.0, 4)], DR_GRPO)
    data = json.loads(json.dumps(original.to_json()))
    assert data["loss"]["advantage"] == "dr-grpo" and data["samples"][0]["reward"] == 1.0 and data["samples"][0]["group"] == 4
    again = Case.from_json(data)
    assert again == original and again.digest() == original.digest()
    given = case(model, [Sample(input_ids=[1, 2, 3], loss_mask=[0, 1, 1], advantages=0.5, old_logprobs=[0.0, -1.0, -2.0])],
                 LossSpec(kind="ppo_clip"))
    data = given.to_json()
    assert "advantage" not in data["loss"] and not {"reward", "group"} & set(data["samples"][0])


def test_an_engine_without_the_estimator_is_told_which(model):
    declared = Capabilities(families=frozenset({"llama"}), losses=frozenset({LossKind.PPO_CLIP}),
                            advantage_estimators=frozenset({AdvantageEstimator.GRPO}))
    assert declared.unsupported_reason(case(model, [grouped()])) is None
    assert "advantage estimator dr-grpo" in declared.unsupported_reason(case(model, [grouped()], DR_GRPO))
    assert Capabilities.from_json(declared.to_json()) == declared


def by_hand(rewards: list[float]) -> list[float]:
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
    return [(r - mean) / (std + 1e-6) for r in rewards]


# a full group, a partial one, a group of one, a group of equal rewards; interleaved, with non-consecutive ids
REWARDS = [1.0, 0.0, 0.2, 3.0, 0.25, 0.7, 0.7, 1.0, 0.7]
GROUPS = [9, 2, 9, 40, 9, 2, 13, 9, 13]


@pytest.mark.parametrize("estimator", list(AdvantageEstimator))
def test_harness_and_reference_estimators_agree_with_a_hand_computation(estimator):
    samples = [grouped(r, g) for r, g in zip(REWARDS, GROUPS)]
    harness = group_advantages(samples, estimator)
    reference = normalised(torch.tensor(REWARDS, dtype=torch.float64), torch.tensor(GROUPS, dtype=torch.float64), estimator).tolist()
    nine, two = by_hand([1.0, 0.2, 0.25, 1.0]), by_hand([0.0, 0.7])
    if estimator is AdvantageEstimator.DR_GRPO:
        nine, two = [r - 0.6125 for r in (1.0, 0.2, 0.25, 1.0)], [-0.35, 0.35]
    want = [nine[0], two[0], nine[1], 0.0, nine[2], two[1], 0.0, nine[3], 0.0]  # a group of one, and equal rewards: 0
    assert harness == pytest.approx(want, rel=1e-12, abs=0.0)
    assert reference == pytest.approx(want, rel=1e-12, abs=0.0)
    assert not any(math.isnan(a) for a in harness + reference)


def test_advantages_follow_group_membership_not_position():
    samples = [grouped(r, g) for r, g in zip(REWARDS, GROUPS)]
    order = [8, 3, 0, 5, 7, 1, 6, 2, 4]
    moved = group_advantages([samples[i] for i in order], AdvantageEstimator.GRPO)
    assert moved == [group_advantages(samples, AdvantageEstimator.GRPO)[i] for i in order]


def test_the_reference_reports_its_advantages_and_the_harness_validates_them(model):
    estimated = case(model, [grouped(1.0, 5), grouped(0.0, 5), grouped(1.0, 8)])
    result = resolve_engine("reference").run(estimated)
    assert validate_result("reference", estimated, result).advantages.tolist() == pytest.approx([0.70710, -0.70710, 0.0], abs=1e-5)
    with pytest.raises(InvalidResult, match=r"result.advantages has shape \(2,\), expected \(3,\)"):
        validate_result("demo", estimated, dataclasses.replace(result, advantages=result.advantages[:2]))
    given = estimated.with_(samples=tuple(dataclasses.replace(s, reward=None, group=None, advantages=1.0) for s in estimated.samples),
                            loss=LossSpec(kind="ppo_clip"))
    with pytest.raises(InvalidResult, match=r"result.advantages is set but the case's loss computes no advantages"):
        validate_result("demo", given, result)


def test_an_engine_without_the_estimator_has_the_scenario_unsupported_with_the_reason():
    from packcheck.harness.run.scenario_runner import setting_for
    from packcheck.harness.scenarios import SCENARIOS

    scenario, setting = SCENARIOS["rl_group_advantages"], setting_for("llama", "float64", "cpu")
    policy = Capabilities(families=frozenset({"llama"}), losses=frozenset({LossKind.PPO_CLIP}))
    assert "computes no GRPO advantages of its own" in scenario.applies(setting, policy)
    assert scenario.applies(setting, resolve_engine("reference").capabilities) is None
