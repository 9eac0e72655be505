"""The gradient oracle's loss: sum w[i, t] logp[i, t] with the weights each sample carries.

Every position gets the weight of the (sample, token) it predicts (policy_inputs.scatter_per_token),
so the weights follow each document wherever the layout, a micro-batch or a context-parallel shard
put it, including the position that predicts a document's token 0 from what precedes it in the row.
Positions predicting nothing weigh 0. No normalisation: d loss / d logp = w exactly, and each
forward's terms summed over micro-batches and ranks (gradients summed, parallel/data_parallel.py) give the
global loss (harness/contract/loss.py).
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.loss.policy_inputs import scatter_per_token


def weighted_logprob_sum(case: Case, predictions: Predictions, lp_BT: torch.Tensor) -> torch.Tensor:
    w_BT = scatter_per_token(predictions, lambda i: case.samples[i].logprob_weights)
    return (lp_BT * w_BT.to(lp_BT)).sum()
