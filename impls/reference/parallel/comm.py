"""Differentiable collectives over the context-parallel group, built on torch.distributed's own
ops so that collective recorders see them in the forward and in the backward.

- `all_to_all(x, group, scatter_dim, gather_dim)`: chunk `scatter_dim` across ranks, concatenate
  what arrives along `gather_dim`; its backward is the all-to-all the other way round.
- `ring_shift(x, group)`: send x to the next rank of the ring, receive the previous rank's; its
  backward sends the gradient back the other way.
- `all_gather(x, group, dim)`: every rank's x concatenated along dim, in rank order; its backward
  sums the gradient over the ranks and keeps this rank's part (each rank's copy of the whole
  gets gradient only from that rank's own outputs).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _all_to_all(x: torch.Tensor, group, scatter_dim: int, gather_dim: int) -> torch.Tensor:
    size = dist.get_world_size(group)
    # equal shards (the caller pads rows to a multiple of cp), stacked: all_to_all_single is the one gloo has on every
    # torch this package supports (gloo in torch 2.11 has no list form, dist.all_to_all: seen on the GPU machines)
    chunks_N = torch.stack(x.chunk(size, dim=scatter_dim))
    received_N = torch.empty_like(chunks_N)
    dist.all_to_all_single(received_N, chunks_N, group=group)
    return torch.cat(received_N.unbind(0), dim=gather_dim)


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, scatter_dim, gather_dim):
        ctx.group, ctx.dims = group, (scatter_dim, gather_dim)
        return _all_to_all(x, group, scatter_dim, gather_dim)

    @staticmethod
    def backward(ctx, grad):
        scatter_dim, gather_dim = ctx.dims
        return _all_to_all(grad, ctx.group, gather_dim, scatter_dim), None, None, None


def all_to_all(x: torch.Tensor, group, scatter_dim: int, gather_dim: int) -> torch.Tensor:
    return _AllToAll.apply(x, group, scatter_dim, gather_dim)


def _exchange(x: torch.Tensor, group, send_offset: int) -> torch.Tensor:
    """Send x to the rank `send_offset` ahead in the group; receive from the one as far behind."""
    size, me = dist.get_world_size(group), dist.get_rank(group)
    to = dist.get_global_rank(group, (me + send_offset) % size)
    source = dist.get_global_rank(group, (me - send_offset) % size)
    x = x.contiguous()
    received = torch.empty_like(x)
    for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, x, to), dist.P2POp(dist.irecv, received, source)]):
        request.wait()
    return received


class _RingShift(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _exchange(x, group, +1)

    @staticmethod
    def backward(ctx, grad):
        return _exchange(grad, ctx.group, -1), None


def ring_shift(x: torch.Tensor, group) -> torch.Tensor:
    return _RingShift.apply(x, group)


def all_gather_no_grad(x: torch.Tensor, group, dim: int) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


class _AllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, dim):
        ctx.group, ctx.dim = group, dim
        return all_gather_no_grad(x, group, dim)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad.chunk(dist.get_world_size(ctx.group), dim=ctx.dim)[dist.get_rank(ctx.group)], None, None


def all_gather(x: torch.Tensor, group, dim: int) -> torch.Tensor:
    return _AllGather.apply(x, group, dim)
