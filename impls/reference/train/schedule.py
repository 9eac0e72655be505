"""The learning-rate schedule of the reference trainer: linear warmup, then cosine decay to a floor.

Step s counts optimizer steps from 1: lr rises linearly to `peak` over `warmup` steps, then follows
half a cosine from `peak` at step `warmup` down to `peak * final_ratio` at step `total`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class WarmupCosine:
    peak: float
    warmup: int
    total: int
    final_ratio: float = 0.1

    def __post_init__(self) -> None:
        assert 0 <= self.warmup < self.total, f"warmup ({self.warmup} steps) must end before the last step ({self.total})"

    def __call__(self, step: int) -> float:
        if step <= self.warmup:
            return self.peak * step / self.warmup
        progress = (step - self.warmup) / (self.total - self.warmup)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return self.peak * (self.final_ratio + (1.0 - self.final_ratio) * cosine)
