"""The mesh of a run and its process groups: data, context, tensor, pipeline and expert parallel.

The rank layout is the contract's (ParallelPlan.coordinates): tp fastest, then cp, dp, pp, so with
tp = pp = 1 global rank = dp_rank * cp + cp_rank: the ranks of one context-parallel group are
adjacent and share the same micro-batches, each holding a contiguous 1/cp of every row; the ranks
of one data-parallel group hold the same shard position of different micro-batches. The ranks of
one tensor-parallel group see the same tokens and hold other slices of each layer; those of one
pipeline group hold other layers. Expert parallelism adds no ranks: it spreads the experts over
`ep` consecutive ranks of the data-parallel group.

`all_reduce(x, "world")` sums over the ranks that hold other tokens of the same layer slice (the
dp x cp group, WORLD when tp = pp = 1): what the loss, the counts and the per-sample reports are
summed over. A single-process run is the 1 x 1 mesh with no groups, and every reduction on it is
the identity.

A process group is made once per set of ranks and kept for the life of the world group: a launch
serves many cases, and a gloo group made per case is never freed (each keeps a transport thread
that wakes hundreds of times a second, hundreds of them per rank after a scenario's cases).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from packcheck.harness.contract import ParallelPlan


_groups: dict[tuple[int, ...], object] = {}
_groups_world: list[object] = [None]  # the world group the kept groups belong to

REDUCE_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}


def group_of(ranks: list[int]) -> object:
    """The process group of `ranks`, made on first use (every rank must call this, in the same order)."""
    if _groups_world[0] is not dist.group.WORLD:  # a new world: the kept groups are gone with the old one
        _groups.clear()
        _groups_world[0] = dist.group.WORLD
    key = tuple(ranks)
    if key not in _groups:
        _groups[key] = dist.new_group(list(key))
    return _groups[key]


def _my_group(plan: ParallelPlan, axis: str, rank: int) -> object:
    """Every group of `axis` made (on every rank, in the same order: by the first rank of each), and `rank`'s returned."""
    mine = None
    for first in range(plan.world_size):
        ranks = plan.group_ranks(axis, first)
        if min(ranks) == first:
            group = group_of(ranks)
            if rank in ranks:
                mine = group
    return mine


@dataclass(frozen=True, slots=True)
class Mesh:
    dp: int
    cp: int
    rank: int
    dp_group: object = None
    cp_group: object = None
    device: str = "cpu"  # where collectives run: NCCL groups reduce only device tensors
    tp: int = 1
    pp: int = 1
    ep: int = 1
    # "tp", "pp", "ep", "expert_dp", "data": the groups of the axes above 1 (parallel/tensor_parallel.py and its kin read them)
    groups: dict = field(default_factory=dict)

    @property
    def plan(self) -> ParallelPlan:
        return ParallelPlan(dp=self.dp, cp=self.cp, cp_style="ring" if self.cp > 1 else None, tp=self.tp, pp=self.pp, ep=self.ep)

    @property
    def coordinates(self) -> dict[str, int]:
        return self.plan.coordinates(self.rank)

    @property
    def dp_rank(self) -> int:
        return self.coordinates["dp"]

    @property
    def cp_rank(self) -> int:
        return self.coordinates["cp"]

    @property
    def tp_rank(self) -> int:
        return self.coordinates["tp"]

    @property
    def pp_rank(self) -> int:
        return self.coordinates["pp"]

    @property
    def ep_rank(self) -> int:
        return self.coordinates["ep"]

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp * self.pp

    @property
    def data_ranks(self) -> list[int]:
        """The dp x cp ranks that hold this rank's layer slice (every rank when tp = pp = 1)."""
        return self.plan.group_ranks("data", self.rank)

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
            raise RuntimeError(f"the case needs a process group of {plan.world_size} ranks ({plan.describe()}); found {have}")
        rank = dist.get_rank()
        cp_group, dp_group = _my_group(plan, "cp", rank), _my_group(plan, "dp", rank)
        groups = {axis: _my_group(plan, axis, rank) for axis, degree in
                  (("tp", plan.tp), ("pp", plan.pp), ("ep", plan.ep), ("expert_dp", plan.expert_dp if plan.ep > 1 else 1))
                  if degree > 1}
        if plan.tp * plan.pp > 1:
            groups["data"] = _my_group(plan, "data", rank)
        return cls(dp=plan.dp, cp=plan.cp, rank=rank, dp_group=dp_group, cp_group=cp_group, device=device,
                   tp=plan.tp, pp=plan.pp, ep=plan.ep, groups=groups)

    def group(self, name: str) -> object:
        """The process group `name` ("world": the dp x cp group; "dp", "cp", or an axis of `groups`)."""
        if name == "world":
            return self.groups.get("data")  # None: WORLD itself
        if name in ("dp", "cp"):
            return self.dp_group if name == "dp" else self.cp_group
        return self.groups[name]

    def all_reduce(self, tensor: torch.Tensor, group: str = "world", op: str = "sum") -> torch.Tensor:
        """Sum (or with op "max", the maximum) over `group` (in place; the identity on a single process)."""
        if self.distributed:
            on_device = tensor.to(self.device)
            dist.all_reduce(on_device, op=REDUCE_OPS[op], group=self.group(group))
            if on_device is not tensor:
                tensor.copy_(on_device)
        return tensor
