"""The parallel plan of a Case: data-parallel and context-parallel degrees.

The single-process engine runs dp = cp = 1; distributed engines read the rest. Under context
parallelism the boundaries of a packed row stay global: a document may straddle a shard cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.contract.errors import ContractError

CP_STYLES = ("ulysses", "ring")


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelPlan:
    dp: int = 1
    cp: int = 1
    cp_style: str | None = None
    tp: int = 1

    def __post_init__(self) -> None:
        for field in ("dp", "cp", "tp"):
            if getattr(self, field) < 1:
                raise ContractError(f"parallel.{field} must be >= 1")
        if self.cp > 1 and self.cp_style not in CP_STYLES:
            raise ContractError(f"parallel.cp_style is {self.cp_style!r}: with cp > 1 choose one of {CP_STYLES}")
        if self.cp == 1 and self.cp_style is not None:
            raise ContractError("parallel.cp_style is set but cp == 1: drop cp_style or raise cp")

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp

    def describe(self) -> str:
        parts = [f"dp{self.dp}"]
        if self.cp > 1:
            parts.append(f"cp{self.cp}-{self.cp_style}")
        if self.tp > 1:
            parts.append(f"tp{self.tp}")
        return "x".join(parts)

    def to_json(self) -> dict:
        return {"dp": self.dp, "cp": self.cp, "cp_style": self.cp_style, "tp": self.tp}

    @classmethod
    def from_json(cls, data: dict) -> ParallelPlan:
        return cls(**data)


SINGLE_PROCESS = ParallelPlan()
