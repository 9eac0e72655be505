"""How far one AdamW step carries an error of the gradient into the parameters, per element.

The contract's optimizer step is one AdamW step from a zero state (harness/contract/optimizer.py).
With bias correction its first moment is g and its second g^2, so

    p_after = p (1 - lr wd) - lr g / (|g| + eps),    d p_after / d g = lr eps / (|g| + eps)^2.

That gain is about lr / eps (1e6 at the defaults) where |g| is near zero and about 0 where
|g| >> eps. A float64 gradient is exact only to ~1e-16 of its tensor's scale, and where that
rounding lands depends on the CPU's kernels; through the gain, the elements whose gradient is
near zero move by ~1e-12 of the parameter's scale from one CPU to the next (docs/margins.md,
"Portability"). Judging params_after in units of what its own inputs may err by keeps that
conditioning of the optimizer from reading as an engine error, while any real error of the step
(learning rate, weight decay, eps, bias correction, a parameter that should not move) stays as
loud as before.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import OptimizerSpec


def adamw_step_gain(grad: torch.Tensor, spec: OptimizerSpec) -> torch.Tensor:
    """d p_after / d g, elementwise, of the first AdamW step at gradient `grad`."""
    g = grad.double().abs()
    return spec.lr * spec.eps / (g + spec.eps) ** 2


def error_weights(after: torch.Tensor, grad: torch.Tensor, spec: OptimizerSpec | None) -> torch.Tensor | None:
    """Per element, how many times the parameter tensor's scale an error may reach: 1, plus what an
    error of the gradient tensor's scale moves this element by through the step, in that scale.
    None (plain metrics) without a step or for an all-zero tensor."""
    scale = after.double().abs().max().item() if after.numel() else 0.0
    if spec is None or scale == 0.0:
        return None
    return 1.0 + adamw_step_gain(grad, spec) * grad.double().abs().max() / scale
