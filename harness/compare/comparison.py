"""One measured comparison: who was compared with whom, a quantity, a metric, the observed error,
the allowed error, where.

The margin (observed / allowed) is what reports colour by: < 1 passes, and for a clean engine in
float64 it is typically 1e-5 or smaller; a bug reads as 1e5 and up. `arms` says what was compared
as data: the arm judged and what it was judged against (another arm, the harness's own closed-form
definition, or the stored golden); its text form is only for people. `bound` says what set the
threshold (harness/compare/bound.py): a Tolerance field and its source, or a rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.compare.bound import RULE, Bound, Source

HARNESS = "harness"  # what the harness computes itself: counts, the supervised set, a loss's definition
GOLDEN = "golden"  # the reference trainer's stored float64 golden
NOT_ARMS = frozenset({HARNESS, GOLDEN})  # reserved: no arm is named so


@dataclass(frozen=True, slots=True)
class Arms:
    """The arm whose result is judged, and what it is judged against: another arm, HARNESS or GOLDEN. A judge names
    its own engine arms by name: a plain name is that engine arm of the pass being judged."""

    arm: ArmId
    against: ArmId | str  # an ArmId, HARNESS or GOLDEN

    def __post_init__(self) -> None:
        if isinstance(self.arm, str):
            object.__setattr__(self, "arm", ArmId(self.arm))
        if isinstance(self.against, str) and self.against not in NOT_ARMS:
            object.__setattr__(self, "against", ArmId(self.against))

    @property
    def against_arm(self) -> bool:
        return isinstance(self.against, ArmId)

    def __str__(self) -> str:
        return f"{self.arm} vs {self.against}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    arms: Arms
    # logprobs | loss | num_loss_tokens | grad | dloss_dlogprobs | supervised_set | params_after | samples
    # | clipped_set | ratio | entropy_term | advantages (policy losses)
    # | aux_loss | router_tokens_per_expert (MoE)
    quantity: str
    item: str  # parameter name, sample index, or "" for scalars
    metric: str  # rel_l2 | max_abs | rel | abs | mismatched
    observed: float
    threshold: float
    where: str = ""  # worst location, in words
    bound: Bound = RULE  # what set `threshold`: a tolerance field and its source (Tolerance.by), else a rule

    @property
    def floor_ratio(self) -> float | None:
        """The error as a multiple of the reference's calibrated noise floor, where a calibrated table judged it."""
        if self.bound.source is not Source.CALIBRATED or not self.bound.floor:
            return None
        return self.observed / self.bound.floor

    @property
    def passed(self) -> bool:
        return self.observed <= self.threshold and not math.isnan(self.observed)

    @property
    def margin(self) -> float:
        if self.threshold > 0:
            return self.observed / self.threshold
        return 0.0 if self.observed == 0 else math.inf

    def to_json(self) -> dict:
        arm, against, ratio = self.arms.arm, self.arms.against, self.floor_ratio
        typed = isinstance(against, ArmId)
        # the fields in their order, shallow: asdict's deep copy was two thirds of a 1,250-row verdict's record (0.3 s);
        # arms and bound, the only nested ones, are replaced below, so the JSON is the same
        return ({name: getattr(self, name) for name in _FIELDS} | {"arms": str(self.arms), "arm": str(arm), "against": str(against), "passed": self.passed,
                                "margin": self.margin, "bound": self.bound.to_json(),
                                "arm_role": arm.role.value, "arm_pass": arm.pass_.value,
                                "against_role": against.role.value if typed else None, "against_pass": against.pass_.value if typed else None}
                | ({} if ratio is None else {"floor_ratio": ratio}))

    def headline(self) -> str:
        item = f" {self.item}" if self.item else ""
        where = f" at {self.where}" if self.where else ""
        return (
            f"{self.quantity}{item} ({self.arms}): {self.metric} {self.observed:.3g} > allowed {self.threshold:.3g}{self.allowed_by()}"
            f" (error/tolerance {self.margin:.3g}){where}"
        )

    def allowed_by(self) -> str:
        """" (by ...)" where a derived term set the threshold instead of the table, else ""."""
        return f" ({self.bound.describe()})" if self.bound.term else ""


_FIELDS = tuple(f.name for f in fields(Comparison))
