"""The all-to-all of expert parallelism: rows of uneven counts sent to each rank of a group, differentiable, built on
torch.distributed's own `all_to_all_single` (with split sizes) so that collective recorders see it in the forward and
in the backward, as comm.py's collectives.

- `exchange_counts(send_counts_G, group)`: how many rows each rank of the group will send this rank (a no-grad
  all-to-all of one count per rank).
- `exchange_rows(x_SC, group, send, receive)`: rows [S, ...] cut in consecutive runs of `send[g]` rows, run g going to
  rank g of the group; returns the runs received, in rank order [R, ...] with R = sum(receive). Its backward is the
  same exchange the other way round: every row's gradient goes back to the rank the row came from.

A rank may send or receive no row at all (an expert that no token of the rank chose): gloo and NCCL both take zero
split sizes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def exchange_counts(send_counts_G: torch.Tensor, group) -> list[int]:
    """For each rank g of `group`, how many rows it sends this rank; `send_counts_G[g]`: how many this rank sends g."""
    received_G = torch.empty_like(send_counts_G)
    dist.all_to_all_single(received_G, send_counts_G.contiguous(), group=group)
    return received_G.tolist()


def exchange_no_grad(x: torch.Tensor, group, send: list[int], receive: list[int]) -> torch.Tensor:
    received = x.new_empty((sum(receive), *x.shape[1:]))
    dist.all_to_all_single(received, x.contiguous(), receive, send, group=group)
    return received


class _ExchangeRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, send, receive):
        ctx.group, ctx.send, ctx.receive = group, send, receive
        return exchange_no_grad(x, group, send, receive)

    @staticmethod
    def backward(ctx, grad):
        return exchange_no_grad(grad, ctx.group, ctx.receive, ctx.send), None, None, None


def exchange_rows(x: torch.Tensor, group, send: list[int], receive: list[int]) -> torch.Tensor:
    return _ExchangeRows.apply(x, group, send, receive)
