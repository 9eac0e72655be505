"""A forward's per-position loss terms restricted to the positions in the loss, by selection, not by multiplication.

torch.where keeps a position outside the loss out exactly, whatever it holds: a pad position's log-prob is NaN when a
case poisons its logits (Case.pad_poison), and NaN x 0 = NaN would make the whole sum NaN (Megatron-Bridge PR #3117:
the loss under CP padding). The backward of the selection sends exactly 0 to those positions.
"""

from __future__ import annotations

import torch


def in_loss(values_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """`values_BT` where `mask_BT` is set, exact zeros elsewhere."""
    return torch.where(mask_BT.to(values_BT.device).bool(), values_BT, 0.0)


def loss_sum(values_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    """The sum of `values_BT` over the positions `mask_BT` sets (the Pipeline's `loss_sum` step)."""
    return in_loss(values_BT, mask_BT).sum()
