"""What a shrunk case must still show: the failing comparison (its arms and quantity) and the diagnosis's bug class
(the shared rule that named it, harness/judging/diagnoses.py; None where the scenario's own reading named it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from packcheck.harness.compare import ArmId, Arms, Comparison
from packcheck.harness.contract import Case
from packcheck.harness.judging.diagnoses import diagnosis_rule
from packcheck.harness.judging.status import Status
from packcheck.harness.run.conclusion import first_error_line
from packcheck.harness.run.verdict import Verdict

OWN_READING = "the scenario's own reading"  # how a diagnosis without a shared rule is named to people


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    arms: Arms
    quantity: str
    rule: str | None  # the shared rule of the diagnosis; None: the scenario's own line

    @classmethod
    def of(cls, verdict: Verdict) -> Target:
        """The failing verdict's worst comparison and its diagnosis's class."""
        worst = verdict.worst
        assert verdict.status is Status.FAIL and worst is not None and not worst.passed, "only a failing comparison is a target"
        return cls(arms=worst.arms, quantity=worst.quantity, rule=diagnosis_rule(verdict.diagnosis))

    @property
    def arm_names(self) -> frozenset[str]:
        """The engine arms the comparison needs (an oracle arm is run for the engine arm it is named after)."""
        return frozenset(arm.name for arm in (self.arms.arm, self.arms.against) if isinstance(arm, ArmId))

    def case_of(self, arms: Mapping[str, Case]) -> Case:
        """The case a scenario's sizes are read from: the comparison's engine arm, else the first of `arms` (the first stage's)."""
        return arms.get(self.arms.arm.name) or next(iter(arms.values()))

    def failing(self, verdict: Verdict) -> list[Comparison]:
        return [c for c in verdict.comparisons if not c.passed and c.arms == self.arms and c.quantity == self.quantity]

    def holds(self, verdict: Verdict) -> bool:
        return self.why_not(verdict) is None

    def why_not(self, verdict: Verdict) -> str | None:
        """Why `verdict` does not show the target (None: it does), in a few words for the progress line."""
        if verdict.status is not Status.FAIL:
            return "passes" if verdict.status is Status.PASS else f"{verdict.status}: {in_one_line(verdict)}"
        if not self.failing(verdict):
            return f"{self} passes"
        rule = diagnosis_rule(verdict.diagnosis)
        if rule != self.rule:
            return f"diagnosed otherwise ({rule or OWN_READING})"
        return None

    def __str__(self) -> str:
        return f"{self.quantity} ({self.arms})"

    @property
    def diagnosis_class(self) -> str:
        return self.rule or OWN_READING


def in_one_line(verdict: Verdict) -> str:
    """What ended `verdict`, in one line: its likely cause, and the exception its detail names where the cause does not
    (a judge that crashed names no exception; its traceback does)."""
    cause = verdict.diagnosis.strip().splitlines()[0] if verdict.diagnosis.strip() else ""
    error = first_error_line(verdict.detail) if verdict.detail.strip() else ""
    said = cause if not error or error in cause else f"{cause} ({error})" if cause else error
    return said or "no detail"
