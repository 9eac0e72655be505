"""What became of each arm of a plan when it ran: one typed outcome per arm, read by the conclusion
(harness/run/conclusion.py).

An arm ran with a valid result; or was skipped (an optional arm the engine or the machine cannot
run: the verdict goes on without it); or was unsupported (a required one: the verdict is
unsupported); or returned an invalid result (each problem, field by field, and the result where
it could be kept); or did not run on its mesh; or raised UnsupportedCase for a case it declared
supported; or crashed; or hung. `accept` turns what the
engine's processes reported for a case into its outcome, validating the result again here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from packcheck.harness.collectives import unused_mesh
from packcheck.harness.compare import HARNESS, ArmId, Arms, Comparison
from packcheck.harness.compare.replicas import not_compared
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import EngineInfo, InvalidResult, Problem, validate_result
from packcheck.harness.engines.boundary_weights import boundary_warning
from packcheck.harness.launch import ERROR as LAUNCH_ERROR
from packcheck.harness.launch import HANG as LAUNCH_HANG
from packcheck.harness.launch import INVALID as LAUNCH_INVALID
from packcheck.harness.launch import UNSUPPORTED as LAUNCH_UNSUPPORTED
from packcheck.harness.launch import CaseOutcome, ErrorKind
from packcheck.harness.run.work_share import overworked, unobservable


class Kind(Enum):
    RAN = "ran"
    SKIPPED = "skipped"
    UNSUPPORTED = "unsupported"
    INVALID = "invalid"
    UNUSED_MESH = "unused mesh"
    REFUSED = "refused"  # raised UnsupportedCase for a case its capabilities declare supported
    ERROR = "error"
    HANG = "hang"


@dataclass(frozen=True, kw_only=True, slots=True)
class ArmOutcome:
    arm: ArmId
    case: Case
    kind: Kind
    stage: int  # the index of the plan's stage that built the arm
    result: StepResult | None = None  # RAN; INVALID: the result itself, where the engine's processes could still save it
    reason: str = ""  # SKIPPED, UNSUPPORTED: why; REFUSED, ERROR, HANG: what happened, in words
    problems: tuple[Problem, ...] = ()  # INVALID: every way the result breaks the contract
    unused: tuple[str, ...] = ()  # UNUSED_MESH: every part of the mesh the arm did not use
    # RAN: what a valid result suggests is unreported (harness/engines/boundary_weights.py), what the harness could not see
    # of its ranks (their work, their replicas)
    warnings: tuple[str, ...] = ()
    cause: str = ""  # HANG: the likely cause in one line (harness/launch/outcome.py HangReport.cause)
    deadlocked: bool = False  # HANG: some rank was blocked in a collective (HangReport.waiting)

    @property
    def comparison(self) -> Comparison | None:
        """The verdict's row for a broken contract: an invalid result, an unused mesh."""
        if self.kind is Kind.INVALID:
            return Comparison(arms=Arms(self.arm, HARNESS), quantity="result", item="", metric="invalid",
                              observed=float(len(self.problems)), threshold=0.0, where=self.problems[0].sentence)
        if self.kind is Kind.UNUSED_MESH:
            return Comparison(arms=Arms(self.arm, HARNESS), quantity="mesh", item=self.case.parallel.describe(), metric="unused",
                              observed=float(len(self.unused)), threshold=0.0, where=self.unused[0])
        return None


def declined(arm: ArmId, case: Case, stage: int, reason: str, optional: bool) -> ArmOutcome:
    return ArmOutcome(arm=arm, case=case, stage=stage, kind=Kind.SKIPPED if optional else Kind.UNSUPPORTED, reason=reason)


def accept(engine: EngineInfo, arm: ArmId, case: Case, stage: int, outcome: CaseOutcome, optional: bool) -> ArmOutcome:
    """The arm's outcome from what the engine's processes reported, its result validated again here."""
    def ended(kind: Kind, **fields) -> ArmOutcome:
        return ArmOutcome(arm=arm, case=case, stage=stage, kind=kind, **fields)

    if outcome.status == LAUNCH_UNSUPPORTED:
        return declined(arm, case, stage, f"the engine declines it: {outcome.unsupported}", optional)
    if outcome.status == LAUNCH_INVALID:
        return ended(Kind.INVALID, problems=tuple(outcome.invalid), result=outcome.invalid_result)
    if outcome.status == LAUNCH_HANG:
        return ended(Kind.HANG, reason=outcome.hang.describe(), cause=outcome.hang.cause, deadlocked=bool(outcome.hang.waiting))
    if outcome.status == LAUNCH_ERROR and outcome.error_kind is ErrorKind.UNSUPPORTED_CASE:
        return ended(Kind.REFUSED, reason=outcome.error)
    if outcome.status == LAUNCH_ERROR:
        return ended(Kind.ERROR, reason=outcome.error)
    try:
        result = validate_result(engine.name, case, outcome.result)
    except InvalidResult as err:
        return ended(Kind.INVALID, problems=tuple(err.problems), result=outcome.result)
    warnings = []
    if case.parallel.world_size > 1:
        problems = overworked(case, outcome.work) + unused_mesh(case.parallel, int(case.model.config["num_hidden_layers"]),
                                                                result.collectives or [])
        if problems:
            return ended(Kind.UNUSED_MESH, unused=tuple(problems))
        warnings += [unobservable(case, outcome.work), not_compared(case, result)]
    warnings.append(boundary_warning(case, result))
    return ended(Kind.RAN, result=result, warnings=tuple(w for w in warnings if w))
