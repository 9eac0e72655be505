"""Run one pass of a scenario's plan: each stage in turn builds its arms from the setting and the arms before it,
and its runner (the engine under test, or the oracle engine) runs them; what became of every arm is collected
as typed outcomes (harness/run/outcomes.py), in the order it happened.

Every stage is run the same way. A pass stops at the first outcome that ends the verdict (ends()), where an
oracle stage's engine does not start, and after the first stage where invalid arms leave the rest nothing to
be judged against (blocks_judging). Only the engines run here; what the outcomes mean is harness/run/conclusion.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from packcheck.harness.compare import ArmId, Pass, Role
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import EngineInfo
from packcheck.harness.launch import LaunchFailed, LaunchPool
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.run.invalid_arms import blocks_judging
from packcheck.harness.run.outcomes import ArmOutcome, Kind, accept, declined
from packcheck.harness.scenarios import Scenario, Setting
from packcheck.harness.scenarios.base import Before


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerFailed:
    """An oracle stage whose engine did not start."""

    stage: int
    runner: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Execution:
    """One pass of the plan, run."""

    pass_: Pass
    setting: Setting
    cases: dict[ArmId, Case]  # every arm built (and hosted here), stage by stage, in the order the stages built them
    outcomes: tuple[ArmOutcome, ...]  # in the order they happened
    moved: tuple[ArmId, ...] = ()  # arms this machine cannot host, left for the CPU pass (only where asked to host)
    runner_failed: RunnerFailed | None = None

    @property
    def ending(self) -> ArmOutcome | None:
        """The outcome that ended the pass, if one did."""
        return next((o for o in self.outcomes if ends(o)), None)

    @property
    def ended(self) -> bool:
        return self.ending is not None or self.runner_failed is not None

    @property
    def set_aside(self) -> list[ArmOutcome]:
        """Invalid arms of the first stage: the rest still ran, and are judged where they can be."""
        return [o for o in self.outcomes if o.kind is Kind.INVALID and not ends(o)]

    @property
    def results(self) -> dict[ArmId, StepResult]:
        """The valid results, in the order the arms were built."""
        ran = {o.arm: o.result for o in self.outcomes if o.kind is Kind.RAN}
        return {arm: ran[arm] for arm in self.cases if arm in ran}


def ends(outcome: ArmOutcome) -> bool:
    """Whether the outcome ends the verdict. An invalid arm of the first stage is set aside and the others still run;
    one of a later stage (built from the first stage's results, or the oracle's) ends it like a crash."""
    return outcome.kind in (Kind.UNSUPPORTED, Kind.UNUSED_MESH, Kind.REFUSED, Kind.ERROR, Kind.HANG) or (
        outcome.kind is Kind.INVALID and outcome.stage > 0)


def execute(engine: EngineInfo, scenario: Scenario, setting: Setting, pass_: Pass, pool: LaunchPool, *, host: bool = False,
            keep: Callable[[ArmId, Case], bool] | None = None, given: Mapping[str, Sequence] = {}) -> Execution:
    """Run the plan's stages on `setting`. With `host`, an arm this machine cannot host is not run but `moved`; only
    arms `keep` accepts are built (every arm without it). `given`: engine arms that already ran, by name, each its case
    and result first (harness/run/spot_checks.py, SpotArm), which the later stages build on and the judge sees as the
    first stage's."""
    cases: dict[ArmId, Case] = {ArmId(name, Role.ENGINE, pass_): ran[0] for name, ran in given.items()}
    outcomes: list[ArmOutcome] = [ArmOutcome(arm=arm, case=case, kind=Kind.RAN, stage=0, result=given[arm.name][1])
                                  for arm, case in cases.items()]
    moved: list[ArmId] = []

    def done(runner_failed: RunnerFailed | None = None) -> Execution:
        return Execution(pass_=pass_, setting=setting, cases=cases, outcomes=tuple(outcomes), moved=tuple(moved),
                         runner_failed=runner_failed)

    for index, stage in enumerate(scenario.stages):
        ran = {o.arm: o.result for o in outcomes if o.kind is Kind.RAN}
        before = Before(cases={arm.name: case for arm, case in cases.items() if arm.role is Role.ENGINE},
                        results={arm.name: ran[arm] for arm in cases if arm in ran and arm.role is Role.ENGINE})
        built = {ArmId(name, stage.role, pass_): case for name, case in stage.build(setting, before).items()}
        built = {arm: case for arm, case in built.items() if keep is None or keep(arm, case)}
        if host:
            moved += [arm for arm, case in built.items() if cannot_host(case) is not None]
            built = {arm: case for arm, case in built.items() if arm not in moved}
        cases |= built
        try:
            runner = engine if stage.runner is None else pool.engine_info(stage.runner, "cpu")
        except LaunchFailed as failed:
            return done(RunnerFailed(stage=index, runner=stage.runner, text=failed.text))
        for outcome in run_stage(runner, scenario, built, index, pool):
            outcomes.append(outcome)
            if ends(outcome):
                return done()
        if index == 0 and any(o.kind is Kind.INVALID for o in outcomes) and blocks_judging(scenario, outcomes) is not None:
            return done()
    return done()


def run_stage(runner: EngineInfo, scenario: Scenario, cases: dict[ArmId, Case], stage: int, pool: LaunchPool):
    """Each arm's outcome as it happens: first those the runner or the machine declines, then the rest as they run."""
    runnable = {}
    for arm, case in cases.items():
        reason = runner.unsupported_reason(case) or cannot_host(case)
        if reason is not None and arm.role is Role.ORACLE:  # not the engine's limit: nothing can judge it absolutely
            reason = f"the oracle engine {runner.name!r} cannot run the engine's case, so nothing judges it absolutely: {reason}"
        if reason is None:
            runnable[arm] = case
        else:
            yield declined(arm, case, stage, reason, scenario.optional(arm))
    for arm, case in sorted(runnable.items(), key=lambda item: item[1].parallel.world_size):  # fewer launch switches
        yield accept(runner, arm, case, stage, pool.run(runner.spec, case), scenario.optional(arm))
