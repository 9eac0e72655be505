"""What is shrunk: one failing verdict's cell (engine, scenario, family, dtype, device, attention), the run's inputs
and noise floors, and how long an arm may run; and how a candidate is tried: built (stage one's arms, in the
harness's process: a candidate no case can be made of costs no engine run) and run through the scenario's own
runner in the engine's warm launches (harness/launch/pool.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

from packcheck.harness.contract import Case, ContractError
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.errors import InputError
from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import Scenario, Setting


@dataclass(frozen=True, kw_only=True, slots=True)
class Subject:
    engine: str  # the engine's spec, as --engine named it
    engine_name: str  # the name the engine gives itself
    scenario: Scenario
    family: str
    dtype: str
    device: str
    attention: str = "auto"
    inputs: Inputs = Inputs()  # the run's --model, --seed, --data-scale
    noise_floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.scenario.name} [{self.engine_name} / {self.family} / {self.dtype} / {self.device}]"

    def setting(self, smaller: Smaller | None) -> Setting:
        return self.inputs_with(smaller).setting(self.family, self.dtype, self.device, self.attention)

    def inputs_with(self, smaller: Smaller | None) -> Inputs:
        return dataclasses.replace(self.inputs, smaller=smaller)


class CannotBuild(Exception):
    """A candidate no case can be made of (a contract error, a model the family cannot make smaller): never run."""


def first_arms(scenario: Scenario, setting: Setting) -> dict[str, Case]:
    """The arms the scenario's first stage builds from `setting`; CannotBuild with the reason where it cannot."""
    try:
        return scenario.build(setting)
    except (ContractError, InputError) as err:
        raise CannotBuild(str(err)) from None


def run(subject: Subject, scenario: Scenario, smaller: Smaller | None, pool: LaunchPool) -> Verdict:
    """`scenario` (the subject's, or a narrowed plan of it) judged on the subject's engine at `smaller` inputs."""
    return run_scenario(subject.engine, scenario, subject.family, subject.dtype, subject.device, attention=subject.attention,
                        options=RunOptions(timeout=pool.timeout, pool=pool, inputs=subject.inputs_with(smaller), noise_floors=subject.noise_floors))
