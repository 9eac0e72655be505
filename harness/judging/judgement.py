"""What a scenario builds its arms from (Setting) and what its judge sees (Judgement)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from packcheck.harness.compare import Tolerance, tolerance_for
from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.contract import Case, ModelSpec, StepResult
from packcheck.harness.contract.rows import describe_token
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.judging.truth import Bounds


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    family: str
    dtype: str
    device: str
    model: ModelSpec
    attention: str = "auto"
    seed: int = 0
    data_scale: int = 1  # documents and packed rows this many times longer (a realistic size's data; harness/models/sizes.py)
    model_name: str = "tiny"  # the --model the setting's model came from (a size preset, or a config directory)
    smaller: Smaller | None = None  # the scenario's inputs made smaller (harness/shrink; its model already is, in `model`)

    def tolerance(self, noise_floors: Mapping[str, Mapping[str, float]] | None = None) -> Tolerance:
        """The table the setting's arms are judged by: its dtype's row at its model's size, with the run's own floors
        (--noise-floors: dtype -> field -> floor) where given. The one place it is built; what was judged reads its
        Comparison's bound."""
        return tolerance_for(self.dtype, (noise_floors or {}).get(self.dtype), self.model_name)


@dataclass(frozen=True, kw_only=True, slots=True)
class Judgement:
    """What a judge sees: the engine's arms that ran and their results, by name; the oracle's arms, by the name of the
    engine arm each checks; the tolerance; the setting. An arm is named by its ArmId, or by its name for an engine arm."""

    setting: Setting
    cases: Mapping[str, Case]
    results: Mapping[str, StepResult]
    tolerance: Tolerance  # the table the run judges the setting by (Setting.tolerance)
    oracle_cases: Mapping[str, Case] = field(default_factory=dict)
    oracle: Mapping[str, StepResult] = field(default_factory=dict)  # the oracle's result for the engine arm of that name
    bounds: Bounds = Bounds.TABLE  # what the scenario's entry judges its comparisons by (Scenario.bounds)

    @property
    def bound(self) -> Tolerance:
        """The tolerance the judge compares with: the table, or what the entry's `bounds` make of it."""
        return self.bounds.of(self.setting.family, self.setting.dtype, self.tolerance)

    def locate(self, arm: ArmId | str) -> Callable[[int, int], str]:
        case = self.case(arm)
        return lambda sample, token: describe_token(case, sample, token)

    def has(self, *arms: ArmId | str) -> bool:
        return all(self.ran(arm) for arm in arms)

    def ran(self, arm: ArmId | str) -> bool:
        """Whether `arm` is an arm that ran (False for HARNESS and GOLDEN)."""
        return isinstance(arm, (ArmId, str)) and _key(arm) in self._of(arm)[1]

    def case(self, arm: ArmId | str) -> Case:
        return self._of(arm)[0][_key(arm)]

    def result(self, arm: ArmId | str) -> StepResult:
        return self._of(arm)[1][_key(arm)]

    @property
    def device(self) -> torch.device:
        """Where the engine's gradients are: on a CUDA run the GPU (they stay there: harness/launch/device_result.py)."""
        grads = next((g for r in self.results.values() for g in r.grads.values()), None)
        return torch.device("cpu") if grads is None else grads.device

    @property
    def arms(self) -> list[ArmId]:
        """Every arm that ran: the engine's, then the oracle's."""
        return [ArmId(name) for name in self.results] + [ArmId(name, Role.ORACLE) for name in self.oracle]

    def _of(self, arm: ArmId | str) -> tuple[Mapping[str, Case], Mapping[str, StepResult]]:
        oracle = isinstance(arm, ArmId) and arm.role is Role.ORACLE
        return (self.oracle_cases, self.oracle) if oracle else (self.cases, self.results)


def _key(arm: ArmId | str) -> str:
    return arm.name if isinstance(arm, ArmId) else arm
