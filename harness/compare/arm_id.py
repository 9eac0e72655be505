"""An arm's identity as data: its name, its role (the engine under test, or the oracle that checks it) and its pass
(the run's own, or the CPU float64 logic pass of harness/run/placement.py).

Its text form is what results.json, reports and saved-arm folders have always called the arm ("packed",
"oracle/packed", "cpu_float64/packed", "cpu_float64/oracle/packed"); nothing reads the kind back from that text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


class Role(Enum):
    ENGINE = "engine"  # run by the engine under test
    ORACLE = "oracle"  # run by the oracle engine (the float64 reference) on an engine arm's case


class Pass(Enum):
    MAIN = "main"  # on the run's device and dtype
    CPU_LOGIC = "cpu_float64"  # again on the CPU in float64: arms with more ranks than the machine has GPUs, and their baselines


@dataclass(frozen=True, slots=True)
class ArmId:
    name: str  # the scenario's name for the arm (an oracle arm: the engine arm it checks)
    role: Role = Role.ENGINE
    pass_: Pass = Pass.MAIN

    def __str__(self) -> str:
        return (f"{self.pass_.value}/" if self.pass_ is not Pass.MAIN else "") + (f"{self.role.value}/" if self.role is Role.ORACLE else "") + self.name

    def __lt__(self, other: ArmId) -> bool:  # sorted as their names read
        return str(self) < str(other)

    @property
    def local(self) -> str:
        """The text form within its pass (`oracle/packed`): how a pass's own lines name its arms."""
        return str(self.in_pass(Pass.MAIN))

    def in_pass(self, pass_: Pass) -> ArmId:
        return replace(self, pass_=pass_)

    @property
    def oracle(self) -> ArmId:
        """The oracle's arm for this engine arm."""
        return replace(self, role=Role.ORACLE)
