"""The loss of one forward pass: its share of the global loss, as the case's loss spec defines it.

SFT token-mean: -sum(lp * target_mask) * token_weight. Policy loss: sum(l * w), the per-token
PPO/GRPO loss l weighted by its aggregation weight w. Summed over every forward of every
micro-batch, both give the global loss (harness/contract/loss.py).
"""

from __future__ import annotations

import torch

from harness.contract import Case
from impls.reference import policy_loss
from impls.reference.counts import Counts
from impls.reference.rows import Rows


def forward_loss(case: Case, pipe, rows: Rows, logits_BTV: torch.Tensor, lp_BT: torch.Tensor, counts: Counts) -> torch.Tensor:
    if case.loss.is_policy:
        loss_BT = policy_loss.token_loss(lp_BT, logits_BTV, pipe.policy_inputs(case, rows), case.loss)
        return (loss_BT * pipe.aggregation_weights(case.loss, rows, counts).to(loss_BT)).sum()
    weight = pipe.token_weight(counts.micro_tokens, counts.global_tokens, counts.micro_steps)
    return -(lp_BT * rows.target_mask_BT.to(lp_BT)).sum() * weight
