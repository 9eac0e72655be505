"""The parallel plan of a Case: data, context, tensor, pipeline and expert parallel degrees.

The single-process engine runs every degree at 1; distributed engines read the rest. Under
context parallelism the boundaries of a packed row stay global: a document may straddle a shard
cut. Under pipeline parallelism every stage must see them too: a stage that attends across
documents is the bug of Megatron-Bridge #2952.

- `tp`: tensor parallel: each layer's weights split over `tp` ranks that see the same tokens.
- `pp`: pipeline parallel: the layers split into `pp` consecutive stages, one per rank.
- `ep`: expert parallel (MoE families): the experts split over `ep` ranks of the data-parallel
  group (`ep` divides `dp`; the ranks holding the same experts, dp / ep of them, are the
  expert-data-parallel group). It adds no ranks: tokens of different data-parallel ranks travel
  to the rank holding their expert and back.

`dp_style` says how the data-parallel ranks hold the model: "replicate" (DDP: every rank holds
every parameter, gradient and optimizer state whole) or "shard" (FSDP2 / ZeRO-3: parameters,
gradients and optimizer state sharded over the dp ranks, so a gradient norm needs a reduction over
the shards). None leaves it to the engine.

Ranks are laid out tp fastest, then cp, dp, pp (Megatron-LM's order): rank = ((pp_rank x dp +
dp_rank) x cp + cp_rank) x tp + tp_rank, so with tp = pp = 1 it is dp_rank x cp + cp_rank, as it
always was. `coordinates(rank)` and `group_ranks(axis, rank)` read the layout for everyone (the
reference's mesh, the harness's collective checks), so nothing else spells it.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.contract.errors import ContractError

CP_STYLES = ("ulysses", "ring")
DP_STYLES = ("replicate", "shard")
AXES = ("pp", "dp", "cp", "tp")  # slowest to fastest in the rank layout


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelPlan:
    dp: int = 1
    cp: int = 1
    cp_style: str | None = None
    tp: int = 1
    dp_style: str | None = None
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for field in ("dp", "cp", "tp", "pp", "ep"):
            if getattr(self, field) < 1:
                raise ContractError(f"parallel.{field} must be >= 1")
        if self.cp > 1 and self.cp_style not in CP_STYLES:
            raise ContractError(f"parallel.cp_style is {self.cp_style!r}: with cp > 1 choose one of {CP_STYLES}")
        if self.cp == 1 and self.cp_style is not None:
            raise ContractError("parallel.cp_style is set but cp == 1: drop cp_style or raise cp")
        if self.dp_style is not None and self.dp_style not in DP_STYLES:
            raise ContractError(f"parallel.dp_style is {self.dp_style!r}: choose one of {DP_STYLES}, or None for the engine's choice")
        if self.dp % self.ep:
            raise ContractError(f"parallel.ep={self.ep} must divide parallel.dp={self.dp}: expert parallelism splits the experts over "
                                "ranks of the data-parallel group; raise dp or lower ep")

    @property
    def world_size(self) -> int:
        return self.pp * self.dp * self.cp * self.tp

    @property
    def expert_dp(self) -> int:
        """How many ranks of a data-parallel group hold the same experts."""
        return self.dp // self.ep

    def coordinates(self, rank: int) -> dict[str, int]:
        """Where `rank` sits on each axis, {"pp", "dp", "cp", "tp"}, and "ep": its place in its expert-parallel group."""
        rest, where = rank, {}
        for axis in reversed(AXES):
            rest, where[axis] = divmod(rest, getattr(self, axis))
        where["ep"] = where["dp"] % self.ep
        return where

    def rank_at(self, pp: int = 0, dp: int = 0, cp: int = 0, tp: int = 0) -> int:
        return ((pp * self.dp + dp) * self.cp + cp) * self.tp + tp

    def group_ranks(self, axis: str, rank: int) -> list[int]:
        """The ranks that share every coordinate of `rank` but `axis`, in order: its tp, cp, dp or pp group; "data" is its
        dp x cp group (the ranks that hold other tokens of the same layer shard: gradients are summed over it); "ep" the
        data-parallel ranks its experts are spread over, "expert_dp" those that hold the same experts as it."""
        at = self.coordinates(rank)
        place = lambda **moved: self.rank_at(**({k: at[k] for k in AXES} | moved))  # noqa: E731
        if axis in AXES:
            return [place(**{axis: i}) for i in range(getattr(self, axis))]
        if axis == "data":
            return [place(dp=d, cp=c) for d in range(self.dp) for c in range(self.cp)]
        first = at["dp"] - at["ep"]
        if axis == "ep":  # consecutive data-parallel ranks: dp ranks 0..ep-1 spread the experts, then ep..2ep-1, ...
            return [place(dp=first + e) for e in range(self.ep)]
        if axis == "expert_dp":
            return [place(dp=d * self.ep + at["ep"]) for d in range(self.expert_dp)]
        raise ValueError(f"no parallel axis {axis!r}: use one of {AXES + ('data', 'ep', 'expert_dp')}")

    def position(self, rank: int) -> str:
        """`dp 1, cp 0` (and tp, pp where they are above 1): a rank's place, for people."""
        at = self.coordinates(rank)
        return ", ".join(f"{axis} {at[axis]}" for axis in ("pp", "dp", "cp", "tp") if axis in ("dp", "cp") or getattr(self, axis) > 1)

    def describe(self) -> str:
        parts = [f"dp{self.dp}" + (f"-{self.dp_style}" if self.dp_style else "")]
        if self.cp > 1:
            parts.append(f"cp{self.cp}-{self.cp_style}")
        if self.tp > 1:
            parts.append(f"tp{self.tp}")
        if self.pp > 1:
            parts.append(f"pp{self.pp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        return "x".join(parts)

    def to_json(self) -> dict:
        data = {"dp": self.dp, "cp": self.cp, "cp_style": self.cp_style, "tp": self.tp}
        # unset: digests of older cases unchanged
        return data | ({"dp_style": self.dp_style} if self.dp_style else {}) | {k: getattr(self, k) for k in ("pp", "ep") if getattr(self, k) > 1}

    @classmethod
    def from_json(cls, data: dict) -> ParallelPlan:
        return cls(**data)


SINGLE_PROCESS = ParallelPlan()
