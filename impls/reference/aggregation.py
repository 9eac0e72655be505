"""The reference's aggregation weights: w[b, t] = d loss / d l[b, t] of every row position.

Each mode's weight uses only global counts (harness/contract/loss.py has the table), so summing
sum(l * w) over every forward of every micro-batch gives the global loss whatever the partition,
layout or rank split. Padding and prompt positions weigh 0.
"""

from __future__ import annotations

import torch

from harness.contract import Aggregation, LossSpec
from impls.reference.counts import Counts
from impls.reference.rows import Rows


def sample_tokens_BT(rows: Rows, counts: Counts) -> torch.Tensor:
    """|S_i| of the sample at every position (1 on padding, so it can divide)."""
    lookup = [counts.sample_tokens.get(sample, 0) or 1 for sample in rows.sample_BT.flatten().tolist()]
    return torch.tensor(lookup, dtype=torch.float64).view(rows.sample_BT.shape)


def aggregation_weights(spec: LossSpec, rows: Rows, counts: Counts) -> torch.Tensor:
    mask_BT = rows.target_mask_BT.to(torch.float64)
    match spec.aggregation:
        case Aggregation.TOKEN_MEAN:
            return mask_BT / counts.global_tokens
        case Aggregation.SEQ_MEAN_TOKEN_MEAN:
            return mask_BT / (counts.global_sequences * sample_tokens_BT(rows, counts))
        case Aggregation.SEQ_MEAN_TOKEN_SUM:
            return mask_BT / counts.global_sequences
        case Aggregation.SEQ_MEAN_TOKEN_SUM_NORM:
            return mask_BT / spec.norm_constant
