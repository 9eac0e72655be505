"""mutant.frozen-weight-decay: frozen parameters are handed to the optimizer with zero (not None)
gradients, so AdamW's decoupled weight decay shrinks them every step.

Where it happened: the prime-rl seq_lens contract PR (BUGS.md frozen-tower-decay): a frozen vision
tower run on a dummy input received zero gradients instead of None, and the optimizer, built over
every parameter, decayed it by (1 - lr * wd) per step. The gradients and the loss are exact; only
the frozen weights drift.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def every_parameter(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    parameters = list(model.parameters())
    for p in parameters:
        if p.grad is None:
            p.grad = torch.zeros_like(p)  # the bug: a frozen parameter gets zeros, not None, and stays in the optimizer
    return parameters


class FrozenWeightDecay(ReferenceEngine):
    name = "mutant.frozen-weight-decay"
    bug = "frozen-weight-decay"
    pipeline = replace(REFERENCE, optimizer_parameters=every_parameter)
