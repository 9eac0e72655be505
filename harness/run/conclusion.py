"""What one pass of a plan concludes, as a pure function of data: the outcomes of its arms
(harness/run/execution.py) and their judgement (harness/run/judge.py) in, a PassVerdict out.

An optional arm that could not run is named and the rest judged; a required one makes the pass
unsupported; an arm that crashed, hung, did not use its mesh or returned an invalid result in a
later stage ends it; invalid arms of the first stage fail it, their likely cause named first, after
the valid arms were judged where they could be (harness/run/invalid_arms.py); a judge that found
nothing to compare leaves it unsupported. The verdict's detail is kept as notes until the passes
are combined (harness/run/placement.py): a note about one arm knows its arm, so an unsupported
verdict's reason is read from data, never from the text.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from packcheck.harness.compare import ArmId, Arms, Comparison, Pass
from packcheck.harness.run.execution import Execution, ends
from packcheck.harness.run.invalid_arms import blocks_judging, invalid_detail, invalid_diagnosis
from packcheck.harness.run.judge import Judged
from packcheck.harness.judging.status import Status
from packcheck.harness.run.outcomes import ArmOutcome, Kind
from packcheck.harness.scenarios import Scenario

NOTHING_TO_COMPARE = "no arm beyond the baseline is supported by the engine: nothing to compare"
STATUS = {Kind.INVALID: Status.FAIL, Kind.UNUSED_MESH: Status.FAIL, Kind.REFUSED: Status.ERROR, Kind.ERROR: Status.ERROR, Kind.HANG: Status.HANG}


@dataclass(frozen=True, slots=True)
class Note:
    """A piece of a verdict's detail; one about a single arm says so ("arm 'packed': ...")."""

    text: str
    arm: ArmId | None = None

    def __str__(self) -> str:
        return self.text if self.arm is None else f"arm {self.arm.local!r}: {self.text}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PassVerdict:
    status: Status
    diagnosis: str = ""
    comparisons: tuple[Comparison, ...] = ()
    skipped: tuple[ArmId, ...] = ()  # optional arms that could not run
    notes: tuple[Note, ...] = ()
    nothing_to_compare: bool = False  # judged, and no comparison was made
    judged: bool = False  # every arm ran to its end and the judge saw them
    arms_run: Mapping[str, int] = field(default_factory=dict)  # "device dtype" -> arms judged there

    @property
    def failed(self) -> bool:
        return self.status.failed

    def with_nothing_to_compare(self) -> tuple[Note, ...]:
        return self.notes + ((Note(NOTHING_TO_COMPARE),) if self.nothing_to_compare else ())


def judgeable(scenario: Scenario, run: Execution) -> bool:
    """Whether the pass ran to its end and its invalid arms (if any) leave the rest something to be judged against."""
    return not run.ended and not (run.set_aside and blocks_judging(scenario, first_stage(run)) is not None)


def first_stage(run: Execution) -> list[ArmOutcome]:
    return [o for o in run.outcomes if o.stage == 0]


def conclude_pass(scenario: Scenario, run: Execution, judged: Judged | None, opening: tuple[Note, ...] = ()) -> PassVerdict:
    """The pass's conclusion from its outcomes and, where it was judged (judgeable), its judgement."""
    status, diagnosis, comparisons, skipped, notes = Status.PASS, "", [], [], list(opening)
    for outcome in run.outcomes:
        notes += [Note(f"warning: {warning}\n", outcome.arm) for warning in outcome.warnings]
        if outcome.kind is Kind.SKIPPED:
            skipped.append(outcome.arm)
            notes.append(Note(f"arm {outcome.arm.local!r} skipped: {outcome.reason}\n"))
        elif outcome.kind is Kind.UNSUPPORTED:
            status, notes = Status.UNSUPPORTED, [Note(outcome.reason, outcome.arm)]
        elif ends(outcome):
            note = problem_note(outcome)
            status, diagnosis = STATUS[outcome.kind], problem_diagnosis(scenario, outcome, outcome.reason or str(note))
            notes.append(note)
            comparisons += [outcome.comparison] if outcome.comparison is not None else []
    if run.runner_failed is not None:
        status, diagnosis = Status.ERROR, f"the oracle engine {run.runner_failed.runner!r} did not start: a packcheck problem, not the engine's"
        notes.append(Note(run.runner_failed.text))
    elif run.ending is not None and (runner := scenario.stages[run.ending.stage].runner) is not None:
        diagnosis = f"the oracle engine {runner!r} failed on its arm (a packcheck problem, not the engine's): {diagnosis}"
    nothing = False
    if judged is not None:
        comparisons = [in_pass(c, run.pass_) for c in judged.comparisons]
        notes += [Note(text) for text in judged.notes]
        if judged.crashed:
            status, diagnosis = Status.ERROR, judged.diagnosis
        elif not comparisons and not run.set_aside:  # every arm beyond the baseline was skipped: nothing was tested
            status, nothing = Status.UNSUPPORTED, True
        elif judged.failed:
            status, diagnosis = Status.FAIL, judged.diagnosis
    invalid = run.set_aside
    if invalid and (run.ending is None or run.ending.stage > 0) and (run.runner_failed is None or run.runner_failed.stage > 0):
        status, diagnosis = Status.FAIL, invalid_cause(scenario, run, status, diagnosis, comparisons)
    comparisons += [o.comparison for o in invalid]
    notes = [Note(invalid_detail(o) + "\n", o.arm) for o in invalid] + notes
    ran = Counter(f"{case.device} {case.dtype}" for case in (run.cases[arm] for arm in run.results)) if judged is not None else Counter()
    return PassVerdict(status=status, diagnosis=diagnosis, comparisons=tuple(comparisons), skipped=tuple(skipped), notes=tuple(notes),
                       nothing_to_compare=nothing, judged=judged is not None, arms_run=dict(ran))


def invalid_cause(scenario: Scenario, run: Execution, status: Status, diagnosis: str, judged: list[Comparison]) -> str:
    """The invalid arms' likely cause first, then what became of the valid ones."""
    cause = invalid_diagnosis(run.set_aside)
    blocked = blocks_judging(scenario, first_stage(run))
    if blocked is not None:
        return f"{cause}. {blocked}"
    if status is Status.ERROR:
        return f"{cause}. Judging the valid arms went wrong too: {diagnosis}"
    if any(not c.passed for c in judged):
        return f"{cause}. The valid arms disagree too: {diagnosis}"
    if not judged:  # every arm the valid ones are compared with is among the invalid
        return f"{cause}. No valid arm was left with an arm to be compared with"
    return f"{cause}. The valid arms agree within tolerance ({len(judged)} comparisons)"


def problem_note(outcome: ArmOutcome) -> Note:
    """What an outcome that ended the pass says in the detail."""
    arm, case = outcome.arm, outcome.case
    if outcome.kind is Kind.INVALID:
        return Note("the engine returned an invalid StepResult:\n  - " + "\n  - ".join(p.sentence for p in outcome.problems), arm)
    if outcome.kind is Kind.UNUSED_MESH:
        return Note(f"arm {arm.local!r} ({case.describe()}) did not run on its mesh:\n  - " + "\n  - ".join(outcome.unused))
    if outcome.kind is Kind.REFUSED:
        return Note("the engine raised UnsupportedCase for a case its capabilities declare supported: fix the declaration or the "
                    f"engine.\n{outcome.reason}", arm)
    if outcome.kind is Kind.HANG:
        return Note(f"arm {arm.local!r} ({case.describe()}):\n{outcome.reason}")
    return Note(f"arm {arm.local!r} ({case.describe()}) failed:\n{outcome.reason}")


def problem_diagnosis(scenario: Scenario, outcome: ArmOutcome, detail: str) -> str:
    """The likely cause, from the outcome's own reason (`detail`), never from the arm's header above it; a deadlock's with
    what it most likely means in this scenario."""
    if outcome.kind is Kind.UNUSED_MESH:
        return f"the engine did not run the arm on its mesh: {outcome.comparison.where}"
    if outcome.kind is Kind.INVALID:
        return f"the engine broke the result contract: {outcome.comparison.where}"
    if outcome.kind is Kind.HANG:
        cause = outcome.cause or "a collective never completed on some rank (deadlock): see the per-rank states and stacks"
        meaning = f". In {scenario.name} that most likely means {scenario.deadlock}" if outcome.deadlocked and scenario.deadlock else ""
        return cause + meaning
    return "the engine crashed: " + first_error_line(detail)


def in_pass(comparison: Comparison, pass_: Pass) -> Comparison:
    """A judge's comparison (its arms named as the judge names them) with its arms in the pass that ran them."""
    if pass_ is Pass.MAIN:
        return comparison
    arms = comparison.arms
    against = arms.against.in_pass(pass_) if arms.against_arm else arms.against
    return dataclasses.replace(comparison, arms=Arms(arms.arm.in_pass(pass_), against))


def reason(notes: Sequence[Note]) -> str:
    """Why a verdict with these notes is unsupported, in one line without the arm's name: the same reason reads the same
    across scenarios."""
    first = next((note for note in notes if str(note).strip()), None)
    if first is None:
        return "no reason given"
    if first.arm is not None and first.text.strip():
        return first.text.strip().splitlines()[0]
    return "".join(map(str, notes)).strip().splitlines()[0]


def first_error_line(detail: str) -> str:
    """The first line that names an exception ("...Error: ..."), else the first line."""
    lines = [line.strip() for line in detail.splitlines() if line.strip() and not line.startswith(" ")]
    named = [line for line in lines if re.search(r"\w(Error|Exception|Exit|Interrupt)\b", line)]
    return (named[0] if named else lines[0] if lines else "no detail")[:300]
