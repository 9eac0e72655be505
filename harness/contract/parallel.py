"""The parallel plan of a Case: data-parallel and context-parallel degrees.

The single-process engine runs dp = cp = 1; distributed engines read the rest. Under context
parallelism the boundaries of a packed row stay global: a document may straddle a shard cut.

`dp_style` says how the data-parallel ranks hold the model: "replicate" (DDP: every rank holds
every parameter, gradient and optimizer state whole) or "shard" (FSDP2 / ZeRO-3: parameters,
gradients and optimizer state sharded over the dp ranks, so a gradient norm needs a reduction over
the shards). None leaves it to the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.contract.errors import ContractError

CP_STYLES = ("ulysses", "ring")
DP_STYLES = ("replicate", "shard")


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelPlan:
    dp: int = 1
    cp: int = 1
    cp_style: str | None = None
    tp: int = 1
    dp_style: str | None = None

    def __post_init__(self) -> None:
        for field in ("dp", "cp", "tp"):
            if getattr(self, field) < 1:
                raise ContractError(f"parallel.{field} must be >= 1")
        if self.cp > 1 and self.cp_style not in CP_STYLES:
            raise ContractError(f"parallel.cp_style is {self.cp_style!r}: with cp > 1 choose one of {CP_STYLES}")
        if self.cp == 1 and self.cp_style is not None:
            raise ContractError("parallel.cp_style is set but cp == 1: drop cp_style or raise cp")
        if self.dp_style is not None and self.dp_style not in DP_STYLES:
            raise ContractError(f"parallel.dp_style is {self.dp_style!r}: choose one of {DP_STYLES}, or None for the engine's choice")

    @property
    def world_size(self) -> int:
        return self.dp * self.cp * self.tp

    def describe(self) -> str:
        parts = [f"dp{self.dp}" + (f"-{self.dp_style}" if self.dp_style else "")]
        if self.cp > 1:
            parts.append(f"cp{self.cp}-{self.cp_style}")
        if self.tp > 1:
            parts.append(f"tp{self.tp}")
        return "x".join(parts)

    def to_json(self) -> dict:
        data = {"dp": self.dp, "cp": self.cp, "cp_style": self.cp_style, "tp": self.tp}
        return data | ({"dp_style": self.dp_style} if self.dp_style else {})  # unset: digests of older cases unchanged

    @classmethod
    def from_json(cls, data: dict) -> ParallelPlan:
        return cls(**data)


SINGLE_PROCESS = ParallelPlan()
