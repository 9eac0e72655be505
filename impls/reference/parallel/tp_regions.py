"""The conjugate autograd ops at the edges of a tensor-parallel region (Megatron-LM's mappings), built on
torch.distributed's own calls so that collective recorders see them, in the forward and in the backward.

Every rank of a tensor-parallel group holds the same activations outside a region and its own slice inside:
- `copy_to_tp_region(x, group)`: identity forward; backward all-reduces (each rank's slice of the layer sent
  back only its own part of the gradient of the replicated input). In front of column-parallel layers.
- `reduce_from_tp_region(x, group)`: forward all-reduces the partial sums of a row-parallel layer; identity
  backward (every rank holds the same upstream gradient of the replicated output). After row-parallel layers.
- `gather_from_tp_region(x, group, dim)`: forward all-gathers the slices along `dim`; backward keeps this rank's
  part of the (replicated) upstream gradient, no reduction. Where a rank needs the whole of a sliced output.
- `sum_grad_over_tp(parameter, group)`: a replicated parameter used inside a region (qk-norm weights act on this
  rank's heads only) gets each rank's partial gradient summed over the group as it is computed.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from packcheck.impls.reference.parallel.comm import all_gather_no_grad


def _summed(x: torch.Tensor, group) -> torch.Tensor:
    x = x.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(x, group=group)
    return x


class _CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _summed(grad, ctx.group), None


class _ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        return _summed(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, dim):
        ctx.group, ctx.dim = group, dim
        return all_gather_no_grad(x, group, dim)

    @staticmethod
    def backward(ctx, grad):
        part = grad.chunk(dist.get_world_size(ctx.group), dim=ctx.dim)[dist.get_rank(ctx.group)]
        return part.contiguous(), None, None


def copy_to_tp_region(x: torch.Tensor, group) -> torch.Tensor:
    return _CopyToRegion.apply(x, group)


def reduce_from_tp_region(x: torch.Tensor, group) -> torch.Tensor:
    return _ReduceFromRegion.apply(x, group)


def gather_from_tp_region(x: torch.Tensor, group, dim: int) -> torch.Tensor:
    return _GatherFromRegion.apply(x, group, dim)


def sum_grad_over_tp(parameter: torch.nn.Parameter, group) -> None:
    parameter.register_hook(lambda grad: _summed(grad, group))
