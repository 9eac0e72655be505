"""Shrink one failing verdict: refuse what cannot be shrunk, take its worst failing comparison and its diagnosis's class
as the target, run only the arms that comparison needs where the scenario allows it (and they still show the target),
search (harness/shrink/search.py) within the budget, and return the smallest case found with its sizes before and after.

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
from packcheck.harness.shrink.plans import narrowable, only_arms
from packcheck.harness.shrink.search import Search
from packcheck.harness.shrink.subject import Subject, first_arms, run
from packcheck.harness.shrink.target import Target

DEFAULT_BUDGET = 120.0  # seconds per verdict


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
    narrowed: bool  # only the arms the comparison needs (and the required ones) ran
    control: str | None  # the engine that passed every case kept (the reference), or None where there was none


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
    scenario, verdict, narrowed = narrowed_plan(subject, target, full, first, pool)
    cases = first_arms(scenario, subject.setting(None))
    if narrowed:
        say(f"  only the arms {', '.join(sorted(target.arm_names))} and the required ones run: they show it alone "
            f"({time.monotonic() - started:.1f}s)")
    control = control_for(subject, scenario, pool)
    say(f"  control: {control.engine_name} passes it and must pass every smaller case kept" if control is not None
        else f"  no control: {ORACLE_ENGINE} does not pass this scenario here (or is the engine shrunk)")
    say(f"  searching from {time.monotonic() - started:.1f}s")
    search = Search(subject=subject, scenario=scenario, target=target, pool=pool, deadline=started + budget, control=control, cases=cases,
                    verdict=verdict, say=say)
    complete = search.run_passes()
    before = Size.of(target.case_of(full))
    return Shrunk(subject=subject, target=target, smaller=search.current, arms=search.cases, verdict=search.verdict,
                  first_diagnosis=str(first.diagnosis), before=before, after=Size.of(search.arm), seconds=time.monotonic() - started,
                  trials=len(search.trials), complete=complete, narrowed=narrowed, control=control and control.engine_name)


def control_for(subject: Subject, scenario: Scenario, pool: LaunchPool) -> Subject | None:
    """The reference (ORACLE_ENGINE) as the control every smaller case must pass, where it passes the scenario's own case."""
    if subject.engine == ORACLE_ENGINE:
        return None
    reference = dataclasses.replace(subject, engine=ORACLE_ENGINE, engine_name=ORACLE_ENGINE)
    return reference if run(reference, scenario, None, pool).status is Status.PASS else None


def narrowed_plan(subject: Subject, target: Target, full: Mapping[str, Case], first: Verdict, pool: LaunchPool) -> tuple[Scenario, Verdict, bool]:
    """The plan the search runs, its verdict at full size, and whether it is narrowed to the target's arms: narrowed where
    the scenario allows it, it cuts an arm, and the narrowed plan still shows the target (a diagnosis may read the other arms)."""
    scenario = subject.scenario
    if not narrowable(scenario, target.arm_names, full):
        return scenario, first, False
    narrow = only_arms(scenario, target.arm_names)
    verdict = run(subject, narrow, None, pool)
    return (narrow, verdict, True) if target.holds(verdict) else (scenario, first, False)
