"""One measured comparison: a quantity, a metric, the observed error, the allowed error, where.

The margin (observed / allowed) is what reports colour by: < 1 passes, and for a clean engine in
float64 it is typically 1e-5 or smaller; a bug reads as 1e5 and up.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    arms: str  # which arms were compared, e.g. "packed vs unpacked", or "engine vs harness"
    # logprobs | loss | num_loss_tokens | grad | dloss_dlogprobs | supervised_set | params_after | samples
    # | clipped_set | ratio | entropy_term (policy losses)
    quantity: str
    item: str  # parameter name, sample index, or "" for scalars
    metric: str  # rel_l2 | max_abs | rel | abs | mismatched
    observed: float
    threshold: float
    where: str = ""  # worst location, in words

    @property
    def passed(self) -> bool:
        return self.observed <= self.threshold and not math.isnan(self.observed)

    @property
    def margin(self) -> float:
        if self.threshold > 0:
            return self.observed / self.threshold
        return 0.0 if self.observed == 0 else math.inf

    def to_json(self) -> dict:
        return asdict(self) | {"passed": self.passed, "margin": self.margin}

    def headline(self) -> str:
        item = f" {self.item}" if self.item else ""
        where = f" at {self.where}" if self.where else ""
        return (
            f"{self.quantity}{item} ({self.arms}): {self.metric} {self.observed:.3g} > allowed {self.threshold:.3g}"
            f" (margin {self.margin:.3g}){where}"
        )
