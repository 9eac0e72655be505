"""Adapter checks of prime_rl with the real prime-rl pieces from the checkout (PACKCHECK_PRIME_RL_SRC;
skipped, with that reason, without it): the data as prime-rl packs it carries every token once and
keeps its owner, the clipped surrogate handed to prime-rl as a custom loss is the contract's, and the
declared limits. The scenarios themselves run through the conformance suite (nox -s adapters).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from packcheck.harness.contract import UNPACKED, Layout, LayoutKind, LossSpec, ParallelPlan, packed
from packcheck.harness.data.rl import off_policy_samples, rollout_samples
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.losses.policy import token_loss
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.impls.adapters.prime_rl import source

if source.skip_reason():
    pytest.skip(source.skip_reason(), allow_module_level=True)

from packcheck.harness.engines import resolve_engine  # noqa: E402
from packcheck.impls.adapters.prime_rl import batch  # noqa: E402
from packcheck.impls.adapters.prime_rl.engine import PrimeRL  # noqa: E402
from packcheck.impls.adapters.prime_rl.ppo_loss import ppo_clip_loss  # noqa: E402
from packcheck.impls.adapters.prime_rl.variants import PrimeRLCpRankLoss, PrimeRLFusedLmHead  # noqa: E402

source.load()


def case_for(layout, **fields):
    setting = setting_for("llama", "float64", "cpu")
    return arm(setting, "probe", samples_for(setting, MIXED_DOCUMENTS), layout, **fields)


def test_every_engine_is_registered():
    assert type(resolve_engine("prime_rl")) is PrimeRL
    assert type(resolve_engine("prime_rl.fused-lm-head")) is PrimeRLFusedLmHead
    assert type(resolve_engine("prime_rl.cp-rank-loss")) is PrimeRLCpRankLoss


@pytest.mark.parametrize("cp", [1, 2, 4])
@pytest.mark.parametrize("layout", [packed(48), UNPACKED], ids=["packed", "unpacked"])
def test_prime_rl_packing_carries_every_token_once_with_its_owner(layout, cp):
    case = case_for(layout)
    seen = {}
    for micro_batch in case.partition.per_rank[0]:
        for row in batch.rows_for(case, micro_batch, cp, torch.float64):
            ids = row.tensors["input_ids"][0].tolist()
            assert len(ids) % cp == 0  # pad_micro_batch to a multiple of cp: shard_for_cp never splits unevenly
            if layout.kind is LayoutKind.PACKED:
                assert len(ids) <= layout.seq_len + cp - 1
            else:
                assert len({o for o in row.sample_of_token if o is not None}) == 1  # a bin of its own
            assert sum(row.tensors["seq_lens"].tolist()) == len(ids) == sum(row.sequence_lengths)
            for owner in {o for o in row.sample_of_token if o is not None}:
                positions = [p for p, o in enumerate(row.sample_of_token) if o == owner]
                assert positions == list(range(positions[0], positions[0] + len(positions)))  # contiguous
                assert row.tensors["position_ids"][0, positions].tolist() == list(range(len(positions)))
                seen[owner] = [ids[p] for p in positions]
    assert seen == {i: list(s.input_ids) for i, s in enumerate(case.samples)}


def test_prepare_sample_truncates_a_sample_longer_than_seq_len_silently():
    """prime-rl's documented behaviour, out of the harness's reach (a Case refuses samples longer than seq_len), so
    pinned here: the tail is cut, no error, no warning; a user's counts then silently miss those tokens."""
    from prime_rl.trainer.batch import prepare_sample

    case = case_for(packed(48))
    longest = max(range(len(case.samples)), key=lambda i: len(case.samples[i].input_ids))
    prepared = prepare_sample(batch.training_sample(case, longest), 4)
    assert prepared.input_ids == list(case.samples[longest].input_ids[:4]) and prepared.sequence_lengths == [4]


def test_the_sft_loss_is_prime_rls_ce_component_on_the_loss_mask():
    case = case_for(packed(48))
    row = batch.rows_for(case, case.partition.per_rank[0][0], 1, torch.float64)[0]
    mask = row.tensors["loss_mask"][0]
    assert torch.equal(row.tensors["ce_weights"][0] != 0, mask)
    assert not (row.tensors["rl_weights"][0] != 0).any()  # no rl member tokens: the rl count stays 0


@pytest.mark.parametrize("spec", [LossSpec(kind="ppo_clip", clip_low=0.2, clip_high=0.8, dual_clip=4.0),
                                  LossSpec(kind="ppo_clip", clip_low=0.2, clip_high=0.8, dual_clip=4.0, kl_coef=0.1)],
                         ids=["clip", "kl"])
def test_the_custom_loss_is_the_contracts_clipped_surrogate(spec):
    from prime_rl.trainer.rl.loss import LossInputs

    base = case_for(packed(48)).samples
    rollout = [torch.randn(len(s.input_ids), dtype=torch.float64, generator=torch.Generator().manual_seed(i)) - 3.0
               for i, s in enumerate(base)]
    samples = off_policy_samples(base, rollout, ratios=(0.5, 1.0, 1.4, 2.5, 6.0), seed=0)
    for sample, logp in zip(samples, rollout):
        want = token_loss(logp, sample, spec)
        mask = torch.tensor(sample.loss_mask, dtype=torch.bool)
        tensor = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
        inputs = LossInputs(trainer_logprobs=logp.clone().requires_grad_(True), inference_logprobs=tensor(sample.old_logprobs),
                            ref_logprobs=tensor(sample.ref_logprobs), advantages=tensor(sample.token_advantages), loss_mask=mask)
        got = ppo_clip_loss(inputs, spec.clip_low, spec.clip_high, spec.dual_clip, spec.kl_coef).loss
        got.backward()
        assert math.isclose(float(got), float(want.value_T[mask].sum()), rel_tol=1e-13, abs_tol=1e-13)
        assert torch.allclose(inputs.trainer_logprobs.grad, want.dvalue_dlogp_T * mask, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("change, words", [
    (dict(layout=Layout(kind=LayoutKind.UNPACKED, padding_side="left")), "pads at the end only"),
    (dict(layout=packed(48, padding_side="left")), "pads at the end only"),
    (dict(layout=Layout(kind=LayoutKind.STACKED, bucket_width=8)), "layout 'stacked'"),
    (dict(parallel=ParallelPlan(cp=2, cp_style="ring")), "cp_style 'ring'"),
    (dict(loss=LossSpec(kind="ppo_clip", aggregation="seq-mean-token-mean")), "aggregation"),
    (dict(loss=LossSpec(kind="ppo_clip", entropy_coef=0.01)), "loss terms"),
])
def test_declared_limits_are_refused_with_the_reason(change, words):
    case = case_for(packed(48))
    if "loss" in change:
        change = change | {"samples": rollout_samples(case.samples)}
    case = dataclasses.replace(case, **change)
    reason = PrimeRL().unsupported_reason(case)
    assert reason is not None and words in reason
