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
from collections.abc import Iterator, Mapping

import torch

from packcheck.harness.contract import OptimizerSpec


def global_norm(grads: dict[str, torch.Tensor]) -> float:
    """The L2 norm over every tensor of `grads`, in float64."""
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))


def adamw_step(params: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor], spec: OptimizerSpec,
               grad_norm: float | None) -> SteppedParameters:
    """The parameters after one step, float64: those with a gradient stepped, the rest (frozen) as they were."""
    coefficient = spec.clip_coefficient(grad_norm) if grad_norm is not None else 1.0
    return SteppedParameters(params, grads, spec, coefficient)


def stepped(param: torch.Tensor, grad: torch.Tensor, spec: OptimizerSpec, coefficient: float) -> torch.Tensor:
    """One parameter after the step, float64, where `param` and `grad` are: p (1 - lr wd) - lr / (1 - beta1) m / (sqrt(v)
    / sqrt(1 - beta2) + eps), m = (1 - beta1) g, v = (1 - beta2) g g, g the gradient times the clip coefficient. The
    same float64 operations in the same order as that expression, made in place where a temporary would be: three
    float64 tensors of the parameter's size at once, not seven (an 8B embedding's is 4.2 GB;
    tests/test_optimizer_judge.py holds it bit for bit to the expression)."""
    beta1, beta2 = spec.betas
    g = grad.double() * coefficient
    exp_avg, exp_avg_sq = (1 - beta1) * g, (1 - beta2) * g
    exp_avg_sq.mul_(g)
    del g
    denom = exp_avg_sq.sqrt_().div_(math.sqrt(1 - beta2)).add_(spec.eps)
    update = exp_avg.mul_(spec.lr / (1 - beta1)).div_(denom)
    del denom, exp_avg_sq
    return (param.double() * (1 - spec.lr * spec.weight_decay)).sub_(update)


class SteppedParameters(Mapping):
    """adamw_step's parameters, each computed when it is read and held by no one here: at 8B the whole step is 64 GB
    of float64, more than a GPU spares beside an engine. On the device of its checkpoint tensor (a gradient kept on the
    host, beyond the harness's share of the GPU, is brought there)."""

    def __init__(self, params: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor], spec: OptimizerSpec, coefficient: float):
        self.params, self.grads, self.spec, self.coefficient = params, grads, spec, coefficient

    def __getitem__(self, name: str) -> torch.Tensor:
        p = self.params[name].double()
        if name not in self.grads:
            return p.clone()
        return stepped(p, self.grads[name].to(p.device), self.spec, self.coefficient)

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)


def as_checkpoint(value: torch.Tensor, checkpoint: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether `value` is exactly `checkpoint` in `dtype` (compared where `value` is)."""
    return torch.equal(value.to(dtype), checkpoint.to(device=value.device, dtype=dtype))


def steps_past_rounding(expected: torch.Tensor, before: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether the harness's step changes some element by more than `dtype`'s spacing there (eps x |value| is at least
    one spacing). A smaller step can round away in a correct engine: AdamW applies its weight decay and its update as
    two roundings, each below half a spacing, where the exact sum of the two is above it."""
    value = before.double()
    return bool(((expected.double() - value).abs() > torch.finfo(dtype).eps * value.abs()).any())
