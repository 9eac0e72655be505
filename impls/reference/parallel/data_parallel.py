"""Data parallelism through torch's DistributedDataParallel, with gradients *summed* over the mesh.

Each rank backpropagates its own share of the global loss (its tokens' terms over the global
count), so the gradient of the global loss is the sum of the ranks' gradients, not their mean:
a communication hook replaces DDP's averaging all-reduce by a summing one (over every rank of the
dp x cp group: context-parallel ranks hold different tokens of the same rows; under tensor or
pipeline parallelism that group holds one layer slice, and the other slices reduce apart). Ranks may run
different numbers of forwards (rows and buckets differ per rank): all but a rank's last backward
run under `no_sync`, so DDP reduces exactly once per step on every rank.
"""

import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from packcheck.impls.reference.parallel.mesh import Mesh


def _sum_over_group(group, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    return dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future().then(lambda done: done.value()[0])


class GradientSync:  # no `from __future__ import annotations`: DDP checks the hook's annotations at run time
    """Wraps the model for one step; `backward_context(last, micro_batch_ends)` says whether this backward syncs (and
    whether it ends a micro-batch, which matters to FSDP2 only: parallel/fully_sharded.py)."""

    def __init__(self, model: torch.nn.Module, mesh: Mesh):
        self.model = model
        self.ddp = None
        if len(mesh.data_ranks) > 1:
            device_ids = [torch.device(mesh.device).index] if mesh.device.startswith("cuda") else None
            group = mesh.group("world")
            self.ddp = DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False, init_sync=False,
                                               process_group=group)
            self.ddp.register_comm_hook(group, _sum_over_group)

    @property
    def forward_module(self) -> torch.nn.Module:
        return self.ddp if self.ddp is not None else self.model

    def backward_context(self, last: bool, micro_batch_ends: bool):
        return self.ddp.no_sync() if self.ddp is not None and not last else contextlib.nullcontext()
