"""The policy loss on a tiny batch computed by hand: the harness's closed form (harness/losses) and
the reference trainer's autograd implementation (impls/reference) both give exactly these numbers.

The batch, clip 0.2 and dual clip 3:
  sample 0: targets at t = 1, 2, 3; advantage +1 for the sample; ratios 1.0, 1.5, 0.5
            -> losses -1 (unclipped), -1.2 (clipped above: weight 0), -0.5 (unclipped below: A > 0)
  sample 1: one target at t = 1; per-token advantage -2; ratio 4.0
            -> max(8, 2.4) = 8, capped by the dual clip at -A c = 6 (weight 0)
  sample 2: fully masked (counts in neither N nor G)
so N = 4 targets, G = 2 non-empty samples, token losses sum to -2.7 + 6 = 3.3.
"""

from __future__ import annotations

import math

import pytest
import torch

from packcheck.harness.contract import UNPACKED, Aggregation, Case, LossSpec, Partition, Sample, packed
from packcheck.harness.losses import Branch, token_loss, token_weights
from packcheck.harness.models import model_spec
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import count_targets
from packcheck.impls.reference.loss.policy_inputs import scatter_per_token
from packcheck.impls.reference.loss.entropy import prediction_entropy
from packcheck.impls.reference.step.objective import forward_loss
from packcheck.impls.reference.step.train_step import build_micro_batches

LOGPROBS = ([0.0, -1.0, -2.0, -0.5], [0.0, -3.0, -1.0], [0.0, -0.7])
RATIOS = ([1.0, 1.0, 1.5, 0.5], [1.0, 4.0, 1.0], [1.0, 1.0])
MASKS = ([0, 1, 1, 1], [0, 1, 0], [0, 0])
ADVANTAGES = (1.0, [0.0, -2.0, 0.0], 1.0)

# mode -> (norm_constant, loss, d loss / d logp of sample 0; samples 1 and 2 have weight 0 everywhere)
HAND = {
    Aggregation.TOKEN_MEAN: (None, 3.3 / 4, [0.0, -1 / 4, 0.0, -0.5 / 4]),
    Aggregation.SEQ_MEAN_TOKEN_MEAN: (None, (-2.7 / 3 + 6.0) / 2, [0.0, -1 / 6, 0.0, -0.5 / 6]),
    Aggregation.SEQ_MEAN_TOKEN_SUM: (None, (-2.7 + 6.0) / 2, [0.0, -1 / 2, 0.0, -0.5 / 2]),
    Aggregation.SEQ_MEAN_TOKEN_SUM_NORM: (10.0, 3.3 / 10, [0.0, -1 / 10, 0.0, -0.5 / 10]),
}


def samples(ref_shift: float = 0.0) -> list[Sample]:
    """ref_shift moves sample 0's reference log-prob at t = 1 to logp + ref_shift (the KL case)."""
    out = []
    for i, (lp, ratio, mask, advantage) in enumerate(zip(LOGPROBS, RATIOS, MASKS, ADVANTAGES)):
        ref = [v + (ref_shift if (i, t) == (0, 1) else 0.0) for t, v in enumerate(lp)]
        out.append(Sample(input_ids=range(5 + 4 * i, 5 + 4 * i + len(lp)), loss_mask=mask, advantages=advantage,
                          old_logprobs=[v - math.log(r) for v, r in zip(lp, ratio)], ref_logprobs=ref))
    return out


def make_case(spec: LossSpec, layout=UNPACKED, ref_shift: float = 0.0) -> Case:
    return Case(name="hand", model=model_spec("llama"), samples=samples(ref_shift), layout=layout,
                partition=Partition.single_rank([(0, 2), (1,)]), loss=spec)


def spec_for(mode: Aggregation, **fields) -> LossSpec:
    return LossSpec(kind="ppo_clip", aggregation=mode, dual_clip=3.0, norm_constant=HAND[mode][0], **fields)


def harness_loss_and_weights(case: Case) -> tuple[float, list[torch.Tensor]]:
    weights = token_weights(case)
    losses = [token_loss(torch.tensor(lp, dtype=torch.float64), s, case.loss) for lp, s in zip(LOGPROBS, case.samples)]
    loss = sum(float((w * tl.value_T).sum()) for w, tl in zip(weights, losses))
    return loss, [w * tl.dvalue_dlogp_T for w, tl in zip(weights, losses)]


def reference_loss_and_weights(case: Case) -> tuple[float, list[torch.Tensor]]:
    """The reference's forward_loss on positions whose log-probs are the hand values, differentiated by autograd."""
    engine = ReferenceEngine()
    micro_batches = build_micro_batches(case, engine.pipeline)
    total, dloss = 0.0, [torch.zeros(len(lp), dtype=torch.float64) for lp in LOGPROBS]
    for forwards, counts in zip(micro_batches, count_targets(micro_batches)):
        for predictions in forwards:
            lp_BT = scatter_per_token(predictions, lambda i: LOGPROBS[i]).requires_grad_()
            loss = forward_loss(case, engine.pipeline, predictions, torch.zeros(*lp_BT.shape, 4, dtype=torch.float64), lp_BT, counts)
            (grad_BT,) = torch.autograd.grad(loss, lp_BT)
            total += float(loss.detach())
            samples_BT, tokens_BT = predictions.label_sample_BT, predictions.label_token_BT
            for b, t in (samples_BT >= 0).nonzero().tolist():
                dloss[int(samples_BT[b, t])][int(tokens_BT[b, t])] += grad_BT[b, t]
    return total, dloss


IMPLEMENTATIONS = {"harness": harness_loss_and_weights, "reference": reference_loss_and_weights}


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
@pytest.mark.parametrize("layout", [UNPACKED, packed(16)], ids=["unpacked", "packed"])
@pytest.mark.parametrize("mode", list(Aggregation), ids=[m.value for m in Aggregation])
def test_each_mode_gives_the_hand_computed_loss_and_weights(implementation, layout, mode):
    _, expected_loss, expected_sample0 = HAND[mode]
    loss, dloss = IMPLEMENTATIONS[implementation](make_case(spec_for(mode), layout))
    assert loss == pytest.approx(expected_loss, rel=1e-14)
    assert dloss[0].tolist() == pytest.approx(expected_sample0, abs=1e-15)
    assert dloss[1].abs().max() == 0 and dloss[2].abs().max() == 0, "clipped, dual-clipped and masked tokens weigh 0"


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
def test_k3_kl_penalty_adds_its_value_and_derivative(implementation):
    # sample 0, t = 1: ref - logp = ln 2, so k3 = 2 - ln 2 - 1 and d k3 / d logp = 1 - 2
    case = make_case(spec_for(Aggregation.TOKEN_MEAN, kl_coef=0.5), ref_shift=math.log(2.0))
    loss, dloss = IMPLEMENTATIONS[implementation](case)
    assert loss == pytest.approx((3.3 + 0.5 * (1 - math.log(2.0))) / 4, rel=1e-14)
    assert float(dloss[0][1]) == pytest.approx((-1.0 + 0.5 * (1 - 2.0)) / 4, rel=1e-14)


def test_the_harness_names_the_branch_of_every_token():
    case = make_case(spec_for(Aggregation.TOKEN_MEAN))
    branches = [token_loss(torch.tensor(lp), s, case.loss).branch_T.tolist() for lp, s in zip(LOGPROBS, case.samples)]
    assert branches[0][1:] == [Branch.UNCLIPPED, Branch.CLIPPED, Branch.UNCLIPPED]
    assert branches[1][1] == Branch.DUAL_CLIPPED


def test_entropy_of_a_uniform_prediction_is_log_vocab():
    entropy_BT = prediction_entropy(torch.zeros(2, 5, 7, dtype=torch.float64))
    assert entropy_BT == pytest.approx(torch.full((2, 5), math.log(7), dtype=torch.float64))
