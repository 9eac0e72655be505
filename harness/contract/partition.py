"""Which samples each data-parallel rank processes in each micro-step.

`per_rank[r][s]` is the tuple of sample indices that rank r forwards and backwards in micro-step
s. Every sample appears exactly once; every rank runs the same number of micro-steps (a rank with
fewer steps would leave the others waiting in a collective). The optimizer sees one gradient: the
gradient of the global loss over all of them.

Under a token budget (`Case.token_budget`, token_budget.py) `per_rank[r]` is one group, rank r's
samples, which the engine cuts into micro-steps itself, equalising their number over the ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from packcheck.harness.contract.errors import ContractError


@dataclass(frozen=True, kw_only=True, slots=True)
class Partition:
    per_rank: tuple[tuple[tuple[int, ...], ...], ...]

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "per_rank", tuple(tuple(tuple(int(i) for i in mb) for mb in rank) for rank in self.per_rank)
        )

    @classmethod
    def single_rank(cls, micro_batches: Sequence[Sequence[int]]) -> Partition:
        return cls(per_rank=(tuple(tuple(mb) for mb in micro_batches),))

    @classmethod
    def all_in_one(cls, num_samples: int) -> Partition:
        return cls.single_rank([range(num_samples)])

    @property
    def dp(self) -> int:
        return len(self.per_rank)

    @property
    def micro_batches(self) -> tuple[tuple[int, ...], ...]:
        """The micro-batches of a single-rank partition (the common case)."""
        if self.dp != 1:
            raise ContractError(f"partition has {self.dp} ranks; use per_rank[r] for rank r")
        return self.per_rank[0]

    def check(self, num_samples: int, dp: int) -> None:
        if self.dp != dp:
            raise ContractError(f"partition.per_rank has {self.dp} ranks but parallel.dp is {dp}: give one entry per DP rank")
        steps = {len(rank) for rank in self.per_rank}
        if len(steps) != 1 or 0 in steps:
            raise ContractError(
                f"partition: ranks run {sorted(steps)} micro-steps; every rank needs the same number (>= 1)"
            )
        seen = sorted(i for rank in self.per_rank for mb in rank for i in mb)
        if seen != list(range(num_samples)):
            missing = sorted(set(range(num_samples)) - set(seen))
            dupes = sorted({i for i in seen if seen.count(i) > 1})
            raise ContractError(
                f"partition must use every sample exactly once: missing {missing}, repeated {dupes}, "
                f"out of range {[i for i in seen if not 0 <= i < num_samples]}"
            )
        if any(len(mb) == 0 for rank in self.per_rank for mb in rank):
            raise ContractError("partition has an empty micro-batch: drop it or give it a sample")

    def describe(self) -> str:
        sizes = ["/".join(str(len(mb)) for mb in rank) for rank in self.per_rank]
        return "|".join(sizes)

    def to_json(self) -> list:
        return [[list(mb) for mb in rank] for rank in self.per_rank]

    @classmethod
    def from_json(cls, data: list) -> Partition:
        return cls(per_rank=data)
