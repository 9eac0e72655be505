"""A pass's arms, judged: the scenario's judge and, where a comparison fails, its diagnosis, each called once with
whatever they raise caught (a bug in packcheck's judge must not end the run: it becomes an error verdict; a bug
in a diagnosis leaves the verdict standing with a fallback diagnosis).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Mapping

from packcheck.harness.compare import ArmId, Comparison, Role, Tolerance
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.scenarios import Judgement, Scenario, Setting

JUDGE_CRASHED = "packcheck's judge of this scenario crashed: a packcheck bug, not the engine's"
DIAGNOSIS_CRASHED = "packcheck's diagnosis of this failure crashed (a packcheck bug, not the engine's): read the comparisons"


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    comparisons: tuple[Comparison, ...] = ()
    crashed: bool = False  # the judge raised: its traceback is in `notes`
    diagnosis: str = ""  # of the failing comparisons
    notes: tuple[str, ...] = ()  # for the verdict's detail: a traceback, what could not be written

    @property
    def failed(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]


def judgement(scenario: Scenario, setting: Setting, cases: Mapping[ArmId, Case], results: Mapping[ArmId, StepResult],
              tolerance: Tolerance) -> Judgement:
    """What the scenario's judge sees of a pass's arms: the engine's by name, the oracle's by the engine arm each checks; the
    table and the bounds its entry judges by."""
    def named(arms: Mapping[ArmId, object], role: Role) -> dict:
        return {arm.name: value for arm, value in arms.items() if arm.role is role}
    return Judgement(setting=setting, cases=named(cases, Role.ENGINE), results=named(results, Role.ENGINE), tolerance=tolerance,
                     oracle_cases=named(cases, Role.ORACLE), oracle=named(results, Role.ORACLE), bounds=scenario.bounds)


def judge(scenario: Scenario, j: Judgement) -> Judged:
    try:
        comparisons = tuple(scenario.judge(j))
    except Exception:  # noqa: BLE001 - a bug in packcheck's judge must not end the run
        return Judged(crashed=True, diagnosis=JUDGE_CRASHED, notes=(traceback.format_exc(limit=8),))
    failed = [c for c in comparisons if not c.passed]
    if not failed:
        return Judged(comparisons=comparisons)
    try:
        return Judged(comparisons=comparisons, diagnosis=scenario.diagnose(j, failed))
    except Exception:  # noqa: BLE001 - a bug in packcheck's diagnosis must not end the run: the verdict stands
        return Judged(comparisons=comparisons, diagnosis=DIAGNOSIS_CRASHED, notes=(traceback.format_exc(limit=8),))
