"""The scenario registry, in the order runs list the scenarios."""

from __future__ import annotations

from packcheck.harness.registry import Registry
from packcheck.harness.scenarios.base import Scenario

SCENARIOS: Registry[Scenario] = Registry("scenario")


def register_scenario(scenario: Scenario) -> Scenario:
    return SCENARIOS.register(scenario.name, scenario)


def get_scenario(name: str) -> Scenario:
    return SCENARIOS[name]
