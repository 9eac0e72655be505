"""A scenario's plan narrowed for shrinking and replaying: the same scenario (stages after the first, judge, diagnosis),
its first stage's arms cut to those a comparison needs, or replaced by the arms a shrunk case recorded."""

from __future__ import annotations

import dataclasses
from typing import Mapping

from packcheck.harness.compare import Role
from packcheck.harness.contract import Case
from packcheck.harness.scenarios import Scenario
from packcheck.harness.scenarios.base import Stage


def narrowable(scenario: Scenario, names: frozenset[str], first_arms: Mapping[str, Case]) -> bool:
    """Whether the first stage may run only `names` (and the required arms): every arm named is one of its arms, and
    every later stage is an oracle's, built from whichever engine arms ran (a later engine stage builds from
    named arms of the first, RL's rollouts: those all run)."""
    return names <= set(first_arms) and all(stage.role is Role.ORACLE for stage in scenario.stages[1:])


def only_arms(scenario: Scenario, names: frozenset[str]) -> Scenario:
    """`scenario` whose first stage builds only the arms `names` and the arms it requires (its baselines)."""
    first = scenario.stages[0]
    keep = lambda name: name in names or name not in scenario.optional_arms  # noqa: E731 - one line, read where it is used

    def build(setting, before) -> dict[str, Case]:
        return {name: case for name, case in first.build(setting, before).items() if keep(name)}
    return dataclasses.replace(scenario, stages=(dataclasses.replace(first, build=build), *scenario.stages[1:]))


def replaying(scenario: Scenario, arms: Mapping[str, Case]) -> Scenario:
    """`scenario` whose first stage is `arms` as recorded (later stages, judge and diagnosis its own)."""
    first = scenario.stages[0]
    recorded = dict(arms)
    return dataclasses.replace(scenario, stages=(Stage(build=lambda setting, before: dict(recorded), role=first.role, golden=first.golden),
                                                 *scenario.stages[1:]))
