"""A distributed engine for the recorder's tests that reduces through DTensor and the functional collectives only.

Every rank computes the single-process reference result (so the result is valid and known), then exchanges through
the paths DTensor-based engines use: DTensor redistributions (Partial -> Replicate: an all_reduce; Shard -> Replicate,
`full_tensor`: an all_gather; Partial -> Shard: a reduce_scatter), `_functional_collectives` with each form of group it
accepts (a ProcessGroup, a list of ranks, a DeviceMesh and a dim, a one-rank subgroup), and the backward all_reduce of
a functional all_reduce's autograd formula. Rank 0 returns the result. On a case tagged "skip", rank 1 skips the last
functional all_reduce, which rank 0 waits in.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

from packcheck.harness.contract import Case, StepResult
from packcheck.impls.reference.engine import ReferenceEngine
from tests.engines.distributed import single_process


class FunctionalCollectives(ReferenceEngine):
    name = "functional_collectives"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(single_process(case))
        rank = dist.get_rank()
        mesh = init_device_mesh("cpu", (2,))
        own_x_RD = torch.full((2, 3), float(rank + 1), dtype=torch.float64)
        summed_RD = DTensor.from_local(own_x_RD, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local()
        assert torch.equal(summed_RD, torch.full((2, 3), 3.0, dtype=torch.float64))
        whole_RD = DTensor.from_local(own_x_RD, mesh, [Shard(0)]).full_tensor()
        assert whole_RD.shape == (4, 3)
        scattered_RD = DTensor.from_local(own_x_RD, mesh, [Partial()]).redistribute(mesh, [Shard(0)]).to_local()
        assert torch.equal(scattered_RD, torch.full((1, 3), 3.0, dtype=torch.float64))

        alone = [dist.new_group([0]), dist.new_group([1])]  # every rank creates every group
        x_D = torch.ones(5, dtype=torch.float64)
        for group in (dist.group.WORLD, [0, 1], (mesh, 0), alone[rank]):
            funcol.all_reduce(x_D, "max", group).wait()
        w_D = torch.ones(5, dtype=torch.float64, requires_grad=True)
        funcol.all_reduce(w_D * 2, "sum", dist.group.WORLD).sum().backward()  # the backward all-reduces the gradient
        assert torch.equal(w_D.grad, torch.full((5,), 4.0, dtype=torch.float64))

        if not ("skip" in case.tags and rank == 1):
            funcol.all_reduce(x_D, "sum", mesh).wait()
        return result if rank == 0 else None
