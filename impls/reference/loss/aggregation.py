"""The reference's aggregation weights: w[b, t] = d loss / d l[b, t] of every row position.

Each mode's weight uses only global counts (harness/contract/loss.py has the table), so summing
sum(l * w) over every forward of every micro-batch gives the global loss whatever the partition,
layout or rank split. Padding and prompt positions weigh 0.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import Aggregation, LossSpec
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.loss.counts import Counts


def sample_tokens_BT(predictions: Predictions, counts: Counts) -> torch.Tensor:
    """|S_i| of the sample each position predicts for (1 where none, so it can divide)."""
    samples_BT = predictions.label_sample_BT.cpu()
    lookup = [counts.sample_tokens.get(sample, 0) or 1 for sample in samples_BT.flatten().tolist()]
    return torch.tensor(lookup, dtype=torch.float64).view(samples_BT.shape)


def aggregation_weights(spec: LossSpec, predictions: Predictions, counts: Counts) -> torch.Tensor:
    mask_BT = predictions.label_mask_BT.cpu().to(torch.float64)
    match spec.aggregation:
        case Aggregation.TOKEN_MEAN:
            return mask_BT / counts.global_tokens
        case Aggregation.SEQ_MEAN_TOKEN_MEAN:
            return mask_BT / (counts.global_sequences * sample_tokens_BT(predictions, counts))
        case Aggregation.SEQ_MEAN_TOKEN_SUM:
            return mask_BT / counts.global_sequences
        case Aggregation.SEQ_MEAN_TOKEN_SUM_NORM:
            return mask_BT / spec.norm_constant
