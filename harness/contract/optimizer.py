"""The optimizer step a Case may ask for: one AdamW step after the accumulated backward.

`max_grad_norm` (None: no clipping) clips by the *global* gradient norm, as every real trainer
does by default (transformers' Trainer: 1.0): the L2 norm over every trainable parameter of the
whole model, of the gradient of the global loss (after the data-parallel reduction, across every
DP/FSDP/CP rank and shard), taken once per step; when it exceeds `max_grad_norm` every gradient
is scaled by max_grad_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_'s factor) before
AdamW. The engine reports that pre-clip norm as StepResult.grad_norm. Frozen parameters
(ModelSpec.frozen) count in none of it: no gradient, not in the optimizer, no weight decay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from packcheck.harness.contract.errors import ContractError

CLIP_EPS = 1e-6  # torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6)


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimizerSpec:
    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.1
    max_grad_norm: float | None = None

    def __post_init__(self) -> None:
        clip = self.max_grad_norm
        if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or not math.isfinite(clip) or clip <= 0):
            raise ContractError(f"optimizer.max_grad_norm is {clip!r}: use a positive finite float, or None for no clipping")

    @property
    def clips(self) -> bool:
        return self.max_grad_norm is not None

    def clip_coefficient(self, grad_norm: float) -> float:
        """The factor every gradient is scaled by before the step, given the global pre-clip norm."""
        if self.max_grad_norm is None:
            return 1.0
        return min(1.0, self.max_grad_norm / (grad_norm + CLIP_EPS))

    def to_json(self) -> dict:
        data = {"lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}
        return data | ({"max_grad_norm": self.max_grad_norm} if self.clips else {})  # unset: digests of older cases unchanged

    @classmethod
    def from_json(cls, data: dict) -> OptimizerSpec:
        return cls(lr=data["lr"], betas=tuple(data["betas"]), eps=data["eps"], weight_decay=data["weight_decay"],
                   max_grad_norm=data.get("max_grad_norm"))
