"""What a scenario builds its arms from (Setting) and what its judge sees (Judgement)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from packcheck.harness.compare import Tolerance
from packcheck.harness.contract import Case, ModelSpec, StepResult
from packcheck.harness.contract.rows import describe_token


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



@dataclass(frozen=True, kw_only=True, slots=True)
class Judgement:
    """What a judge sees: the arms that ran, their results, the tolerance, the setting."""

    setting: Setting
    cases: Mapping[str, Case]
    results: Mapping[str, StepResult]
    tolerance: Tolerance

    def locate(self, arm: str) -> Callable[[int, int], str]:
        case = self.cases[arm]
        return lambda sample, token: describe_token(case, sample, token)

    def has(self, *arms: str) -> bool:
        return all(arm in self.results for arm in arms)
