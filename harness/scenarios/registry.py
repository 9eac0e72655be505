"""The scenario registry: names are unique, unknown names get near-match suggestions."""

from __future__ import annotations

import difflib

from harness.scenarios.base import Scenario

SCENARIOS: dict[str, Scenario] = {}


def register_scenario(scenario: Scenario) -> Scenario:
    if scenario.name in SCENARIOS:
        raise ValueError(f"scenario {scenario.name!r} is registered twice")
    SCENARIOS[scenario.name] = scenario
    return scenario


def get_scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        close = difflib.get_close_matches(name, SCENARIOS, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no scenario named {name!r}{hint} Known scenarios: {', '.join(SCENARIOS)}")
    return SCENARIOS[name]
