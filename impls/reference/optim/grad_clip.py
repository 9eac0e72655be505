"""Gradient clipping by the global norm, the pipeline steps of it (impls/reference/step/pipeline.py).

The norm is the L2 norm of the gradient of the global loss over every trainable parameter of the
whole model (harness/contract/optimizer.py), computed where it lives: under DDP every rank holds
the reduced gradient whole, so the rank's own squared sum is the global one; under FSDP2 each
data-parallel rank holds 1/dp of every gradient (a DTensor), so each rank sums the squares of its
shard and the sums are all-reduced over the data-parallel group, as torchtitan and torch's own
`clip_grad_norm_` on DTensors do. The context-parallel ranks of one data-parallel rank hold the
same shard: summing over WORLD instead would count every square cp times. Under tensor parallelism
(parallel/tensor_parallel.py) a split gradient's slices are summed over the TP group, and a replicated one, the same
on every TP rank, is counted once. Under expert parallelism each rank holds its experts' slices of the reduced expert
gradients: their squares are summed over the expert-parallel group (each expert counted once). The squares are summed
in float64 whatever the dtype.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.distributed as dist

from packcheck.harness.contract import OptimizerSpec
from packcheck.impls.reference.optim.parameters import is_sharded, local_part
from packcheck.impls.reference.parallel.expert_shard import expert_shard_of
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.tensor_parallel import is_split


def local_squares(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """The sum of the squares of what this rank holds of `grads`, in float64, as a 1-element tensor."""
    total = torch.zeros(1, dtype=torch.float64)
    for g in grads:
        total += local_part(g).detach().double().pow(2).sum().cpu()
    return total


def global_grad_norm(grads: Sequence[torch.Tensor], mesh: Mesh) -> float:
    """The global L2 norm of the trainable gradients, after the data-parallel reduction."""
    dense = [g for g in grads if expert_shard_of(g) is None]
    squares = local_squares([g for g in dense if not is_split(g)])
    if any(is_sharded(g) for g in dense):
        mesh.all_reduce(squares, "dp")
    if mesh.tp > 1:
        squares += mesh.all_reduce(local_squares([g for g in dense if is_split(g)]), "tp")
    return math.sqrt(squares.item() + expert_squares(grads, mesh))


def expert_squares(grads: Sequence[torch.Tensor], mesh: Mesh) -> float:
    """The squares of the expert-parallel slices among `grads`, summed over each one's EP group (0 without EP)."""
    slices = [g for g in grads if expert_shard_of(g) is not None]
    if not slices:
        return 0.0
    squares = local_squares(slices).to(slices[0].device)
    dist.all_reduce(squares, group=expert_shard_of(slices[0]).group)
    return squares.item()


def clip_(grads: Sequence[torch.Tensor], spec: OptimizerSpec, grad_norm: float) -> None:
    """Scale every gradient in place by the contract's clip coefficient for `grad_norm` (1: untouched)."""
    coefficient = spec.clip_coefficient(grad_norm)
    if coefficient < 1.0:
        for g in grads:
            g.mul_(coefficient)


def nothing_between_micro_batches(parameters: Sequence[torch.nn.Parameter], spec: OptimizerSpec | None, mesh: Mesh) -> None:
    """The reference clips once per step, after the reduction: the accumulating gradient is left alone."""
