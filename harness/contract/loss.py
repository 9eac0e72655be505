"""Loss specifications, each defined over the *global* batch (all micro-batches, all ranks).

`sft_token_mean`: with S the set of (sample, position) pairs whose loss_mask is 1 across the whole
global batch, and logp[i, t] = log p(x_t | x_<t) of sample i,

    loss = - sum_{(i, t) in S} logp[i, t] / |S|

so micro-batch m, holding the pairs S_m, must contribute  - sum_{S_m} logp / |S|  (its sum over
the *global* count), never its own mean. The gradient of this loss w.r.t. each log-prob is
-1/|S| on S and 0 elsewhere: engines that report `dloss_dlogprobs` must report exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class LossKind(StrEnum):
    SFT_TOKEN_MEAN = "sft_token_mean"


@dataclass(frozen=True, kw_only=True, slots=True)
class LossSpec:
    kind: LossKind = LossKind.SFT_TOKEN_MEAN

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LossKind(self.kind))

    def to_json(self) -> dict:
        return {"kind": self.kind.value}

    @classmethod
    def from_json(cls, data: dict) -> LossSpec:
        return cls(**data)


SFT_TOKEN_MEAN = LossSpec()
