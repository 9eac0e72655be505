"""Distributed engines for the launcher's tests: real collectives on a real process group.

Each rank computes the full single-process reference result (the reference trainer on the case
with every micro-batch on one rank), so results are valid and known, then issues collectives the
recorder must see. Rank 0 returns the result. The misbehaving ones fail the way real engines do:
a rank skips a collective the others wait in (hang), one rank raises (crash), one rank spins with
the GIL held where no Python watchdog thread can run.
"""

from __future__ import annotations

import re
import torch
import torch.distributed as dist

from packcheck.harness.contract import SINGLE_PROCESS, Case, Partition, StepResult
from packcheck.impls.reference.engine import ReferenceEngine


def single_process(case: Case) -> Case:
    every_micro_batch = tuple(mb for rank in case.partition.per_rank for mb in rank)
    return case.with_(parallel=SINGLE_PROCESS, partition=Partition(per_rank=(every_micro_batch,)))


class AllReducesLoss(ReferenceEngine):
    """WORLD: the loss all-reduced, the loss-token counts all-gathered. With cp > 1 also, on the
    mesh's groups (rank = dp_rank * cp + cp_rank): an async all_reduce on the DP group, a ring
    exchange (batch_isend_irecv) and an all_gather_object on the CP group."""

    name = "all_reduces_loss"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(single_process(case))
        world = dist.get_world_size()
        loss = torch.tensor([result.loss], dtype=torch.float64)
        dist.all_reduce(loss)
        assert torch.allclose(loss, torch.tensor([world * result.loss], dtype=torch.float64)), "every rank computes the same loss"
        counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(counts, torch.tensor([result.num_loss_tokens]))
        assert {int(c) for c in counts} == {result.num_loss_tokens}
        if case.parallel.cp > 1:
            self.mesh_collectives(case, result)
        return result if dist.get_rank() == 0 else None

    def mesh_collectives(self, case: Case, result: StepResult) -> None:
        dp, cp, rank = case.parallel.dp, case.parallel.cp, dist.get_rank()
        cp_groups = [dist.new_group([d * cp + c for c in range(cp)]) for d in range(dp)]
        dp_groups = [dist.new_group([d * cp + c for d in range(dp)]) for c in range(cp)]
        cp_group, dp_group = cp_groups[rank // cp], dp_groups[rank % cp]
        grad_norm = torch.stack([g.norm() for g in result.grads.values()])
        dist.all_reduce(grad_norm, group=dp_group, async_op=True).wait()
        to, source = (rank // cp) * cp + (rank + 1) % cp, (rank // cp) * cp + (rank - 1) % cp
        received = torch.empty(3, dtype=torch.float64)
        ring = [dist.P2POp(dist.isend, torch.full((3,), float(rank), dtype=torch.float64), to),
                dist.P2POp(dist.irecv, received, source)]
        for request in dist.batch_isend_irecv(ring):
            request.wait()
        assert received.tolist() == [float(source)] * 3
        names = [None] * cp
        dist.all_gather_object(names, case.name, group=cp_group)


class Deadlocks(AllReducesLoss):
    """On a case tagged "deadlock", rank 1 skips an all_reduce that rank 0 then waits in forever."""

    name = "deadlocks"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case)
        if "deadlock" in case.tags and dist.get_rank() != 1:
            dist.all_reduce(torch.ones(2, dtype=torch.float64))
        return result


class CrashesOnRank1(AllReducesLoss):
    """On a case tagged "crash", rank 1 raises after the first all_reduce, while rank 0 goes on
    into the all_gather."""

    name = "crashes_on_rank_1"

    def run(self, case: Case) -> StepResult | None:
        if "crash" not in case.tags:
            return super().run(case)
        dist.all_reduce(torch.ones(1, dtype=torch.float64))
        if dist.get_rank() == 1:
            raise RuntimeError("rank 1 lost its data loader")
        dist.all_gather([torch.zeros(1), torch.zeros(1)], torch.ones(1))
        return None


class HoldsTheGil(AllReducesLoss):
    """On a case tagged "gil", rank 1 spins in one regular-expression call that never releases the
    GIL, as a blocked CUDA synchronisation can: its watchdog thread cannot run."""

    name = "holds_the_gil"

    def run(self, case: Case) -> StepResult | None:
        if "gil" in case.tags and dist.get_rank() == 1:
            re.match(r"(a+)+$", "a" * 64 + "b")  # exponential backtracking, all inside C
        return super().run(case)
