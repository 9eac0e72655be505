"""mutant.replica-last-microbatch-after-reduce: each rank adds its last micro-batch's gradient after the
data-parallel reduction, so that gradient is left out of the sum and every replica steps with its own.

Where it happened: DeepSpeed PR #7985 (BF16_Optimizer under ZeRO-1, DeepSpeed 0.18.6 to 0.18.10).
`_backward_epilogue` all-reduced the fp32 gradient accumulator before `optimizer.backward_epilogue()` added the
boundary micro-batch's gradient to it: the accumulator of micro-batches 0..n-2 was reduced over the ranks, and
then each rank added its own last micro-batch's gradient locally. Every rank's gradient is the sum of the others'
earlier micro-batches and its own last one; the ranks' gradients (-3.8% apart per rank in the thread) and so
their replicas drift apart, and a rank 0 whose peers' last micro-batches carry no gradient is exactly right.

The bug is in the path that reduces whole gradients (ZeRO-1 there, DDP here: every all-reduce of a step is taken
before the rank's last backward, which then runs without one); a model FSDP2 shards keeps the reference's
reduce-scatter. On optimizer_step's dp2 DDP arm rank 1's last micro-batch is sample 4, which holds no loss token:
rank 0 misses nothing and its result equals the single process, while rank 1 misses rank 0's last micro-batch. Only
the replica comparison sees that arm; on the cp2 arm the cp ranks' shards of the last micro-batch are missed on rank
0 as well.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.optim.parameters import trainable
from packcheck.impls.reference.parallel.data_parallel import GradientSync
from packcheck.impls.reference.parallel.fully_sharded import ShardedGradientSync, is_fully_sharded
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step import mesh_steps
from packcheck.impls.reference.step.pipeline import REFERENCE


class LastAfterReduce(GradientSync):
    """DDP with every backward unsynchronised: the accumulated gradients are summed over the mesh just before the last."""

    def __init__(self, model: torch.nn.Module, mesh: Mesh):
        super().__init__(model, mesh)
        self.mesh = mesh

    def backward_context(self, last: bool, micro_batch_ends: bool = False):
        if self.ddp is None:
            return contextlib.nullcontext()
        if last:  # the bug: the reduction runs here, and the last backward adds this rank's gradient after it
            parameters = trainable(self.model)
            grads_F = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in parameters])
            self.mesh.all_reduce(grads_F)
            for p, g in zip(parameters, grads_F.split([p.numel() for p in parameters])):
                p.grad = g.view_as(p).clone()
        return self.ddp.no_sync()


def reduce_before_last_backward(model: torch.nn.Module, mesh: Mesh) -> GradientSync | ShardedGradientSync:
    return mesh_steps.gradient_sync(model, mesh) if is_fully_sharded(model) else LastAfterReduce(model, mesh)


class ReplicaLastMicrobatchAfterReduce(ReferenceEngine):
    name = "mutant.replica-last-microbatch-after-reduce"
    bug = "replica-last-microbatch-after-reduce"
    pipeline = replace(REFERENCE, gradient_sync=reduce_before_last_backward)
