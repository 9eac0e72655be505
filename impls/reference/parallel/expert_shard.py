"""Which experts a tensor holds under expert parallelism: a mark on an expert parameter (and on its reduced gradient)
saying it is this rank's slice of a [E, ...] tensor whose other slices the other ranks of `group` hold, in rank order.

optim/parameters.py's `full_tensor` all-gathers a marked tensor whole (the StepResult reports every expert on every
rank), and optim/grad_clip.py's norm sums a marked gradient's squares over `group` (every expert counted once). A mark,
not a DTensor: the all-gathers are torch.distributed calls the collective recorder sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.impls.reference.parallel.comm import all_gather_no_grad

MARK = "expert_shard"


@dataclass(frozen=True, slots=True)
class ExpertShard:
    group: object  # the expert-parallel group: rank g holds experts [g * count, (g + 1) * count)
    count: int  # experts per rank

    def whole(self, tensor: torch.Tensor) -> torch.Tensor:
        return all_gather_no_grad(tensor.detach(), self.group, dim=0)


def mark(tensor: torch.Tensor, shard: ExpertShard) -> torch.Tensor:
    setattr(tensor, MARK, shard)
    return tensor


def expert_shard_of(tensor: torch.Tensor) -> ExpertShard | None:
    return getattr(tensor, MARK, None)
