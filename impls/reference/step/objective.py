"""The loss of one forward pass: its share of the global loss, as the case's loss spec defines it.

Everything is aligned to what each position predicts (impls/reference/data/predictions.py).
SFT token-mean: -sum(lp over label_mask) * token_weight. Policy loss: sum(l * w over label_mask), the per-token
PPO/GRPO loss l weighted by its aggregation weight w, from log-probs that are exactly 0 outside the mask (a poisoned
pad's NaN would otherwise reach d loss / d lp there through the ratio's backward). Weighted log-prob sum (the gradient oracle's):
sum(lp * w) with the weights the samples carry (loss/weighted_loss.py). Summed over every forward of every
micro-batch, both give the global loss (harness/contract/loss.py).
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.loss import policy_loss
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.loss.masked_sum import in_loss
from packcheck.impls.reference.loss.weighted_loss import weighted_logprob_sum
from packcheck.impls.reference.step.pipeline import Pipeline


def forward_loss(case: Case, pipe: Pipeline, predictions: Predictions, logits_BTV: torch.Tensor, lp_BT: torch.Tensor, counts: Counts) -> torch.Tensor:
    mask_BT = predictions.label_mask_BT
    if case.loss.is_policy:
        loss_BT = policy_loss.token_loss(in_loss(lp_BT, mask_BT), logits_BTV, pipe.policy_inputs(case, predictions), case.loss)
        return pipe.loss_sum(loss_BT * pipe.aggregation_weights(case.loss, predictions, counts).to(loss_BT), mask_BT)
    if case.loss.is_weighted:
        return weighted_logprob_sum(case, predictions, lp_BT)
    weight = pipe.token_weight(counts)
    return -pipe.loss_sum(lp_BT, mask_BT) * weight
