"""The aggregation modes of a policy loss as per-token weights over the global batch.

The loss is sum_{i, t in S_i} w[i, t] l[i, t]; w[i, t] = d loss / d l[i, t] depends only on the
loss masks of the whole batch (N tokens, G non-empty samples, |S_i|) and the spec, never on how
the batch is cut into micro-batches, rows or ranks:

    token-mean               w = 1 / N
    seq-mean-token-mean      w = 1 / (G |S_i|)
    seq-mean-token-sum       w = 1 / G
    seq-mean-token-sum-norm  w = 1 / C         (C = loss.norm_constant)

(the table with each micro-batch's share and what an engine all-reduces: harness/contract/loss.py)
"""

from __future__ import annotations

from typing import Sequence

import torch

from packcheck.harness.contract import Aggregation, Case, Sample


def loss_sequences(samples: Sequence[Sample]) -> int:
    """G: the samples with at least one target; fully masked samples are not averaged over."""
    return sum(1 for s in samples if s.num_targets)


def token_weight(case: Case, sample: Sample) -> float:
    """w of every target of `sample` (one value per sample in every mode)."""
    spec = case.loss
    match spec.aggregation:
        case Aggregation.TOKEN_MEAN:
            return 1.0 / case.num_loss_tokens
        case Aggregation.SEQ_MEAN_TOKEN_MEAN:
            return 1.0 / (loss_sequences(case.samples) * sample.num_targets)
        case Aggregation.SEQ_MEAN_TOKEN_SUM:
            return 1.0 / loss_sequences(case.samples)
        case Aggregation.SEQ_MEAN_TOKEN_SUM_NORM:
            return 1.0 / spec.norm_constant


def token_weights(case: Case) -> list[torch.Tensor]:
    """w[i] for every sample, float64 [len(sample i)], zero off the loss mask."""
    return [
        torch.tensor(s.loss_mask, dtype=torch.float64) * (token_weight(case, s) if s.num_targets else 0.0)
        for s in case.samples
    ]
