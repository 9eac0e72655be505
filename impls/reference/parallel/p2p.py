"""Differentiable point-to-point transfers between neighbouring pipeline stages, on torch.distributed's own
send and recv (so collective recorders see them, forward and backward; comm.py holds the group collectives).

- `send_activation(x, peer, group)`: send x to the next stage; returns a 0-dim token (exactly zero) that the
  stage backpropagates from: its backward receives x's gradient from that stage.
- `receive_activation(shape, dtype, peer, group)`: the previous stage's activation, as a tensor that requires
  grad; its backward sends the gradient back to that stage.

`peer` is a global rank. Both ends know the shape: every stage built the same rows. Without gradients
(`torch.no_grad`, the MoE routing pre-pass) the same calls are plain transfers.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class _SendActivation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, peer, group):
        dist.send(x.detach().contiguous(), peer, group=group)
        ctx.peer, ctx.group, ctx.like = peer, group, (x.shape, x.dtype, x.device)
        return x.new_zeros(())

    @staticmethod
    def backward(ctx, _token_grad):
        shape, dtype, device = ctx.like
        grad = torch.empty(shape, dtype=dtype, device=device)
        dist.recv(grad, ctx.peer, group=ctx.group)
        return grad, None, None


class _ReceiveActivation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, anchor, shape, peer, group):
        x = torch.empty(shape, dtype=anchor.dtype, device=anchor.device)
        dist.recv(x, peer, group=group)
        ctx.peer, ctx.group = peer, group
        return x

    @staticmethod
    def backward(ctx, grad):
        dist.send(grad.contiguous(), ctx.peer, group=ctx.group)
        return None, None, None, None


def send_activation(x: torch.Tensor, peer: int, group) -> torch.Tensor:
    return _SendActivation.apply(x, peer, group)


def receive_activation(shape: tuple[int, ...], dtype: torch.dtype, device, peer: int, group) -> torch.Tensor:
    # a leaf that requires grad ties the received tensor into this stage's graph, so its backward (the send back) runs
    anchor = torch.zeros((), dtype=dtype, device=device, requires_grad=torch.is_grad_enabled())
    return _ReceiveActivation.apply(anchor, tuple(shape), peer, group)
