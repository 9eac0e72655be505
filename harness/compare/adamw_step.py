"""The contract's optimizer step computed by the harness itself, in float64: the oracle an engine's
single-process `params_after` is judged against.

One AdamW step from a zero state (torch.optim.AdamW's update, decoupled weight decay, bias
correction) on the gradient clipped by the contract's coefficient for the *reported* pre-clip norm
(harness/contract/optimizer.py). Judging the engine's parameters against this, from its own
reported gradients and norm, catches a wrong step that is the same in every arm (a clip applied
per micro-batch at dp1, weight decay on the wrong tensors, a wrong lr or eps), which comparisons
between arms cannot see.
"""

from __future__ import annotations

import math

import torch

from packcheck.harness.contract import OptimizerSpec


def global_norm(grads: dict[str, torch.Tensor]) -> float:
    """The L2 norm over every tensor of `grads`, in float64."""
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))


def adamw_step(params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor], spec: OptimizerSpec,
               grad_norm: float | None) -> dict[str, torch.Tensor]:
    """The parameters after one step, float64: those with a gradient stepped, the rest (frozen) as they were."""
    coefficient = spec.clip_coefficient(grad_norm) if grad_norm is not None else 1.0
    beta1, beta2 = spec.betas
    after = {}
    for name, p in params.items():
        p = p.double()
        if name not in grads:
            after[name] = p.clone()
            continue
        g = grads[name].double() * coefficient
        exp_avg, exp_avg_sq = (1 - beta1) * g, (1 - beta2) * g * g
        denom = exp_avg_sq.sqrt() / math.sqrt(1 - beta2) + spec.eps
        after[name] = p * (1 - spec.lr * spec.weight_decay) - spec.lr / (1 - beta1) * exp_avg / denom
    return after
