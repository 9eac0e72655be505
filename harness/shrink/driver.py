"""Shrink one failing verdict: refuse what cannot be shrunk, take its worst failing comparison and its diagnosis's class
as the target, judge the reference (the control) on the scenario's own case, run only the arms that comparison needs
and the arms its judge compares them with where the scenario allows it (and the engine still shows the target on them,
the control still passes them), search (harness/shrink/search.py) within the budget, and return the smallest case
found with its sizes before and after.

    shrunk = shrink(subject, pool, budget=120.0, say=print)    # or first=the verdict, when the run just judged it
    shrunk.after.tokens, shrunk.arms                             # the sizes, the minimal arms (harness/shrink/record.py)
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from packcheck.harness.contract import Case
from packcheck.harness.data.size import Size
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.errors import InputError
from packcheck.harness.judging.status import Status
from packcheck.harness.launch import LaunchPool
from packcheck.harness.launch.pool import KEEP
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Scenario
from packcheck.harness.scenarios.base import ORACLE_ENGINE
from packcheck.harness.shrink.budget import DEFAULT_BUDGET
from packcheck.harness.shrink.plans import judged_with, narrowable, only_arms
from packcheck.harness.shrink.search import Search
from packcheck.harness.shrink.subject import Subject, first_arms, run
from packcheck.harness.shrink.target import Target, in_one_line


class NothingToShrink(InputError):
    """A verdict that cannot be shrunk: the message says why, and what to do instead."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Shrunk:
    subject: Subject
    target: Target
    smaller: Smaller
    arms: Mapping[str, Case]  # the first stage's arms of the smallest case: what a replay runs
    verdict: Verdict  # the scenario's verdict of them
    first_diagnosis: str  # the failing verdict's, at the scenario's size
    before: Size
    after: Size
    seconds: float
    trials: int  # engine runs of candidates (the full-size runs not counted)
    complete: bool  # the search ran to its end (False: the budget ran out first; the smallest found is kept)
    only: frozenset[str] | None  # the arms the last engine stage was narrowed to (the comparison's and its partners), or None
    control: str | None  # the engine that passed every case kept (the reference), or None where there was none

    @property
    def narrowed(self) -> bool:
        """Only the arms the comparison needs (with the arms its judge compares them with, and the required ones) ran."""
        return self.only is not None


def refusal(subject: Subject, status: str) -> str | None:
    """Why a verdict of `status` (a Status, or its text in a results file) on the subject's scenario cannot be shrunk, or None."""
    if status == Status.PASS:
        return "nothing to shrink: the verdict passed"
    if status == Status.UNSUPPORTED:
        return "nothing to shrink: the verdict is unsupported (none of its arms was judged)"
    if status != Status.FAIL:
        return (f"nothing to shrink: the verdict ended in {status}, not in a failing comparison; its reproduce command reruns it, "
                "and a crash or a hang is read from its detail")
    if any(stage.golden for stage in subject.scenario.stages):
        return (f"{subject.scenario.name} judges one fixed case against its stored goldens, so it cannot be made smaller; "
                "the scenarios that flag the same bug on any input can (packed_vs_unpacked, oracle_agreement, ...)")
    return None


def shrink(subject: Subject, pool: LaunchPool, budget: float = DEFAULT_BUDGET, say: Callable[[str], None] = lambda line: None,
           first: Verdict | None = None) -> Shrunk:
    """The smallest case found within `budget` seconds on which `first` (the subject's failing verdict; None: judged
    again here) still fails its worst comparison with the same class of diagnosis. NothingToShrink where it cannot be."""
    started = time.monotonic()
    if (why := refusal(subject, Status.FAIL if first is None else first.status)) is not None:
        raise NothingToShrink(why)
    keep, pool.keep = pool.keep, max(pool.keep, 2 * KEEP)  # the control's launches warm beside the engine's
    try:
        return _shrink(subject, pool, budget, say, first, started)
    finally:
        pool.keep = keep


def _shrink(subject: Subject, pool: LaunchPool, budget: float, say: Callable[[str], None], first: Verdict | None, started: float) -> Shrunk:
    if first is None:
        say(f"shrinking {subject.describe()}: judged again at the scenario's size first")
        first = run(subject, subject.scenario, None, pool)
        if first.status is Status.PASS:
            raise NothingToShrink("the failure did not reproduce: judged again, the verdict passes (a nondeterministic engine, "
                                  "or one changed since the run)")
        if (why := refusal(subject, first.status)) is not None:
            raise NothingToShrink(f"judged again, {why}")
    target = Target.of(first)
    say(f"shrinking {subject.describe()}: {target} fails, diagnosed by {target.diagnosis_class}; budget {budget:g}s "
        f"({time.monotonic() - started:.1f}s spent)")
    full = first_arms(subject.scenario, subject.setting(None))
    control, clean = control_for(subject, pool)
    say(f"  control: {control.engine_name} passes the scenario's own case and must pass every smaller case kept" if control is not None
        else f"  no control: {no_control(clean)}")
    scenario, verdict, only = narrowed_plan(subject, target, full, first, pool, control, clean)
    cases = first_arms(scenario, subject.setting(None))
    if only is not None:
        say(f"  only the arms {', '.join(sorted(only))} (the comparison's, and those its judge compares them with) and the required "
            f"ones run: they show it alone ({time.monotonic() - started:.1f}s)")
    say(f"  searching from {time.monotonic() - started:.1f}s")
    search = Search(subject=subject, scenario=scenario, target=target, pool=pool, deadline=started + budget, control=control, cases=cases,
                    verdict=verdict, say=say)
    complete = search.run_passes()
    before = Size.of(target.case_of(full))
    return Shrunk(subject=subject, target=target, smaller=search.current, arms=search.cases, verdict=search.verdict,
                  first_diagnosis=str(first.diagnosis), before=before, after=Size.of(search.arm), seconds=time.monotonic() - started,
                  trials=len(search.trials), complete=complete, only=only, control=control and control.engine_name)


def control_for(subject: Subject, pool: LaunchPool) -> tuple[Subject | None, Verdict | None]:
    """The reference (ORACLE_ENGINE) as the control every smaller case must pass, where it passes the scenario's own case
    (its whole plan at the scenario's size); and its verdict there (None where the engine shrunk is the reference)."""
    if subject.engine == ORACLE_ENGINE:
        return None, None
    reference = dataclasses.replace(subject, engine=ORACLE_ENGINE, engine_name=ORACLE_ENGINE)
    verdict = run(reference, subject.scenario, None, pool)
    return (reference if verdict.status is Status.PASS else None), verdict


def no_control(clean: Verdict | None) -> str:
    """Why there is no control, in words: the engine shrunk is the reference, or how the reference's verdict ended."""
    if clean is None:
        return f"the engine shrunk is {ORACLE_ENGINE}"
    return f"{ORACLE_ENGINE} does not pass the scenario's own case here ({clean.status}: {in_one_line(clean)})"


def narrowed_plan(subject: Subject, target: Target, full: Mapping[str, Case], first: Verdict, pool: LaunchPool,
                  control: Subject | None, clean: Verdict | None) -> tuple[Scenario, Verdict, frozenset[str] | None]:
    """The plan the search runs, its verdict at full size, and the arms it is narrowed to (None: not narrowed): the
    target's arms and those the judge compared them with (in the reference's verdict and the engine's), where the
    scenario allows it, it cuts an arm, the narrowed plan still shows the target (a diagnosis may read the other arms),
    and the control passes it (a judge may read an arm no comparison names)."""
    scenario = subject.scenario
    names = judged_with(target.arm_names, [v for v in (clean, first) if v is not None])
    if not narrowable(scenario, names, full):
        return scenario, first, None
    narrow = only_arms(scenario, names)
    verdict = run(subject, narrow, None, pool)
    if not target.holds(verdict) or (control is not None and run(control, narrow, None, pool).status is not Status.PASS):
        return scenario, first, None
    return narrow, verdict, names
