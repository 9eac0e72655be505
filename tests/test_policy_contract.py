"""The RL additions to the contract: malformed policy cases are refused with a message naming the
field and the fix, RL cases round-trip through JSON, and SFT cases serialise exactly as before."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.contract import UNPACKED, Aggregation, Case, ContractError, LossSpec, Partition, Sample
from packcheck.harness.engines import Capabilities
from packcheck.harness.golden.store import float64_digest, golden_path
from packcheck.harness.models import model_spec
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import SCENARIOS

PPO = LossSpec(kind="ppo_clip")


@pytest.fixture(scope="module")
def model():
    return model_spec("llama")


def case(model, samples, loss=PPO):
    return Case(name="t", model=model, samples=samples, layout=UNPACKED, partition=Partition.all_in_one(len(samples)), loss=loss)


def rl_sample(**fields) -> Sample:
    return Sample(**{"input_ids": [1, 2, 3], "loss_mask": [0, 1, 1], "advantages": 0.5, "old_logprobs": [0.0, -1.0, -2.0]} | fields)


@pytest.mark.parametrize(("sample", "loss", "message"), [
    (rl_sample(advantages=[0.1, 0.2]), PPO, r"samples\[0\].advantages has 2 entries but input_ids has 3: give one advantage per token"),
    (rl_sample(old_logprobs=[0.0, -1.0]), PPO, r"samples\[0\].old_logprobs has 2 entries but input_ids has 3"),
    (rl_sample(advantages=float("nan")), PPO, r"samples\[0\].advantages has non-finite values at tokens \[0\]"),
    (rl_sample(old_logprobs=[0.0, float("-inf"), -1.0]), PPO, r"samples\[0\].old_logprobs has non-finite values at tokens \[1\]"),
    (rl_sample(old_logprobs=None), PPO, r"samples\[0\].old_logprobs is missing: loss.kind 'ppo_clip' needs the behaviour"),
    (rl_sample(advantages=None), PPO, r"samples\[0\].advantages is missing"),
    (rl_sample(), LossSpec(kind="ppo_clip", kl_coef=0.1), r"samples\[0\].ref_logprobs is missing: .*KL penalty"),
    (rl_sample(), LossSpec(), r"samples\[0\].advantages is set but loss.kind is 'sft_token_mean'"),
    (Sample(input_ids=[1, 2], loss_mask=[0, 1], old_logprobs=[0.0, -1.0]), LossSpec(),
     r"samples\[0\].old_logprobs is set but loss.kind is 'sft_token_mean': RL fields need a policy loss"),
])
def test_malformed_policy_cases_name_the_field(model, sample, loss, message):
    with pytest.raises(ContractError, match=message):
        case(model, [sample], loss)


@pytest.mark.parametrize(("fields", "message"), [
    (dict(kl_coef=0.1), r"loss.kl_coef is set but loss.kind is 'sft_token_mean'"),
    (dict(aggregation="seq-mean-token-mean"), r"loss.aggregation is set but loss.kind is 'sft_token_mean'"),
    (dict(kind="ppo_clip", aggregation="seq-mean-token-sum-norm"), r"loss.norm_constant must be a positive number"),
    (dict(kind="ppo_clip", norm_constant=10.0), r"norm_constant is only used by 'seq-mean-token-sum-norm'"),
    (dict(kind="ppo_clip", dual_clip=1.1), r"loss.dual_clip=1.1 must exceed 1 \+ clip_high"),
    (dict(kind="ppo_clip", clip_low=1.0), r"need 0 <= clip_low < 1"),
    (dict(kind="ppo_clip", kl_coef=-1.0), r"kl_coef=-1.0 is negative"),
    (dict(kind="ppo_clip", aggregation="seq-mean"), r"'seq-mean' is not a valid Aggregation"),
])
def test_malformed_loss_specs_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        LossSpec(**fields)


def test_policy_case_round_trips_through_json(model):
    samples = [rl_sample(advantages=[0.0, 1.5, -0.25], ref_logprobs=[0.0, -0.5, -1.5]), rl_sample(ref_logprobs=[0.0, -0.1, -0.2])]
    loss = LossSpec(kind="ppo_clip", aggregation=Aggregation.SEQ_MEAN_TOKEN_SUM_NORM, norm_constant=64.0, dual_clip=3.0, kl_coef=0.1)
    original = case(model, samples, loss)
    again = Case.from_json(json.loads(json.dumps(original.to_json())))
    assert again == original and again.digest() == original.digest()
    assert original.with_(samples=(samples[0], rl_sample(advantages=0.75, ref_logprobs=[0.0, -0.1, -0.2]))).digest() != original.digest()


def test_sft_cases_serialise_as_before_rl_fields_existed(model):
    sft = Case(name="t", model=model, samples=[Sample(input_ids=[1, 2], loss_mask=[0, 1])], layout=UNPACKED,
               partition=Partition.all_in_one(1))
    data = sft.to_json()
    assert data["loss"] == {"kind": "sft_token_mean"}
    assert set(data["samples"][0]) == {"input_ids", "loss_mask"}


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_stored_goldens_still_key_on_the_same_case_digest(family):
    (case_,) = SCENARIOS["golden_regression"].build(setting_for(family, "float64", "cpu")).values()
    stored = json.loads((golden_path(family) / "provenance.json").read_text())
    assert stored["case_digest"] == float64_digest(case_)


def test_per_sample_advantages_broadcast_over_tokens():
    assert rl_sample(advantages=2).token_advantages == (2.0, 2.0, 2.0)
    assert rl_sample(advantages=[0, 1, 2]).token_advantages == (0.0, 1.0, 2.0)


@pytest.mark.parametrize(("capabilities", "loss", "reason"), [
    (Capabilities(families=frozenset({"llama"})), PPO, "loss 'ppo_clip'"),
    (Capabilities(families=frozenset({"llama"}), losses=frozenset({"ppo_clip"}), aggregations=frozenset({Aggregation.TOKEN_MEAN})),
     LossSpec(kind="ppo_clip", aggregation="seq-mean-token-mean"), "loss aggregation 'seq-mean-token-mean'"),
    (Capabilities(families=frozenset({"llama"}), losses=frozenset({"ppo_clip"}), loss_terms=frozenset({"kl"})),
     LossSpec(kind="ppo_clip", entropy_coef=0.01), "loss terms ['entropy']"),
])
def test_capabilities_name_the_unsupported_part_of_a_policy_loss(model, capabilities, loss, reason):
    assert reason in capabilities.unsupported_reason(case(model, [rl_sample()], loss))
