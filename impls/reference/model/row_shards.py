"""How a layer that must see the whole row (a recurrence, a causal convolution) reaches it when
context parallelism gives each rank only a contiguous shard of every row.

`gather` concatenates the shards of a row in rank order, [B, S, ...] -> [B, T, ...], and is
autograd-aware: its backward sums the gradient over the ranks and keeps this rank's shard (each
rank's whole-row copy only receives gradient from this rank's own outputs). `local` keeps this
rank's shard of a whole-row tensor. `WHOLE_ROW` is the single-process case: both are the identity.
The context-parallel backends (impls/reference/parallel) build the distributed ones; the model
only uses them, so it imports no torch.distributed.

Shapes: B batch, T the whole row, S = T / count one shard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


@dataclass(frozen=True, kw_only=True, slots=True)
class RowShards:
    count: int = 1
    index: int = 0
    gather: Callable[[torch.Tensor], torch.Tensor] = _identity  # [B, S, ...] -> [B, T, ...], differentiable
    gather_ids: Callable[[torch.Tensor], torch.Tensor] = _identity  # integer ids, no gradient

    def local(self, x_BT: torch.Tensor) -> torch.Tensor:
        """This rank's shard of a whole-row tensor (rows are padded to a multiple of `count`)."""
        return x_BT if self.count == 1 else x_BT.tensor_split(self.count, dim=1)[self.index]

    def shard_index(self, length: int, device: torch.device | str) -> torch.Tensor:
        """Which shard each of a whole row's `length` positions lives on: [T]."""
        return torch.arange(length, device=device) // (length // self.count)


WHOLE_ROW = RowShards()
