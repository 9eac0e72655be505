"""The optimizer step a Case may ask for: one AdamW step after the accumulated backward."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimizerSpec:
    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.1

    def to_json(self) -> dict:
        return {"lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}

    @classmethod
    def from_json(cls, data: dict) -> OptimizerSpec:
        return cls(lr=data["lr"], betas=tuple(data["betas"]), eps=data["eps"], weight_decay=data["weight_decay"])
