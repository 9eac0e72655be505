"""The dp x cp mesh of a run and its process groups.

Global rank = dp_rank * cp + cp_rank: the ranks of one context-parallel group are adjacent and
share the same micro-batches, each holding a contiguous 1/cp of every row; the ranks of one
data-parallel group hold the same shard position of different micro-batches. A single-process
run is the 1 x 1 mesh with no groups, and every reduction on it is the identity.

A process group is made once per set of ranks and kept for the life of the world group: a launch
serves many cases, and a gloo group made per case is never freed (each keeps a transport thread
that wakes hundreds of times a second, hundreds of them per rank after a scenario's cases).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from packcheck.harness.contract import ParallelPlan


_groups: dict[tuple[int, ...], object] = {}
_groups_world: list[object] = [None]  # the world group the kept groups belong to


def group_of(ranks: list[int]) -> object:
    """The process group of `ranks`, made on first use (every rank must call this, in the same order)."""
    if _groups_world[0] is not dist.group.WORLD:  # a new world: the kept groups are gone with the old one
        _groups.clear()
        _groups_world[0] = dist.group.WORLD
    key = tuple(ranks)
    if key not in _groups:
        _groups[key] = dist.new_group(list(key))
    return _groups[key]


@dataclass(frozen=True, slots=True)
class Mesh:
    dp: int
    cp: int
    rank: int
    dp_group: object = None
    cp_group: object = None
    device: str = "cpu"  # where collectives run: NCCL groups reduce only device tensors

    @property
    def dp_rank(self) -> int:
        return self.rank // self.cp

    @property
    def cp_rank(self) -> int:
        return self.rank % self.cp

    @property
    def world_size(self) -> int:
        return self.dp * self.cp

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def single(cls) -> Mesh:
        return cls(dp=1, cp=1, rank=0)

    @classmethod
    def build(cls, plan: ParallelPlan, device: str = "cpu") -> Mesh:
        """Create the groups; every rank must call this, in the same order."""
        if plan.world_size == 1:
            return cls(dp=1, cp=1, rank=0, device=device)
        if not dist.is_initialized() or dist.get_world_size() != plan.world_size:
            have = dist.get_world_size() if dist.is_initialized() else "no process group"
            raise RuntimeError(f"the case needs a process group of {plan.world_size} ranks (dp{plan.dp} x cp{plan.cp}); found {have}")
        dp, cp, rank = plan.dp, plan.cp, dist.get_rank()
        cp_groups = [group_of([d * cp + c for c in range(cp)]) for d in range(dp)]
        dp_groups = [group_of([d * cp + c for d in range(dp)]) for c in range(cp)]
        return cls(dp=dp, cp=cp, rank=rank, dp_group=dp_groups[rank % cp], cp_group=cp_groups[rank // cp], device=device)

    def all_reduce(self, tensor: torch.Tensor, group: str = "world", op: str = "sum") -> torch.Tensor:
        """Sum (or with op "max", the maximum) over "world", "dp" or "cp" (in place; the identity on a single process)."""
        if self.distributed:
            on_device = tensor.to(self.device)
            dist.all_reduce(on_device, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}[op],
                            group={"world": None, "dp": self.dp_group, "cp": self.cp_group}[group])
            if on_device is not tensor:
                tensor.copy_(on_device)
        return tensor
