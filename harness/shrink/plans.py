"""A scenario's plan narrowed for shrinking and replaying: the same scenario (its stages, judge, diagnosis), the arms
of its last engine stage cut to those a comparison needs and the arms its judge compares them with, or its first stage
replaced by the arms a shrunk case recorded."""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from packcheck.harness.compare import ArmId, Role
from packcheck.harness.contract import Case
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Scenario
from packcheck.harness.scenarios.base import Stage


def last_engine_stage(scenario: Scenario) -> int:
    return max(i for i, stage in enumerate(scenario.stages) if stage.role is Role.ENGINE)


def judged_with(names: frozenset[str], verdicts: Iterable[Verdict]) -> frozenset[str]:
    """`names` and the engine arms the judge compared them with in `verdicts` (a clean engine's verdict names every
    partner: a failing engine's may lack those of an arm whose result was invalid, which the judge never saw)."""
    partners = {comparison.arms.against.name for verdict in verdicts for comparison in verdict.comparisons
                if comparison.arms.arm.name in names and isinstance(comparison.arms.against, ArmId)}
    return names | partners


def narrowable(scenario: Scenario, names: frozenset[str], first_arms: Mapping[str, Case]) -> bool:
    """Whether narrowing `scenario` to `names` may cut an arm: its last engine stage builds arms not named and not
    required. A first stage's arms are known before anything runs; a later one's (RL's policy arms, built from the
    rollouts' results) only by running it, so that is tried."""
    if last_engine_stage(scenario) > 0:
        return True
    return names <= set(first_arms) and any(name not in names and name in scenario.optional_arms for name in first_arms)


def only_arms(scenario: Scenario, names: frozenset[str]) -> Scenario:
    """`scenario` whose last engine stage builds only the arms `names` and the arms it requires (its baselines); the
    stages before it build all theirs (a later stage builds from them), the oracle's stages after it from what ran."""
    index = last_engine_stage(scenario)
    stage = scenario.stages[index]

    def build(setting, before) -> dict[str, Case]:
        return {name: case for name, case in stage.build(setting, before).items() if name in names or name not in scenario.optional_arms}
    stages = list(scenario.stages)
    stages[index] = dataclasses.replace(stage, build=build)
    return dataclasses.replace(scenario, stages=tuple(stages))


def replaying(scenario: Scenario, arms: Mapping[str, Case]) -> Scenario:
    """`scenario` whose first stage is `arms` as recorded (later stages, judge and diagnosis its own)."""
    first = scenario.stages[0]
    recorded = dict(arms)
    return dataclasses.replace(scenario, stages=(Stage(build=lambda setting, before: dict(recorded), role=first.role, golden=first.golden),
                                                 *scenario.stages[1:]))
