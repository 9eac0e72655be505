"""Token-budget micro-batching: the engine cuts each data-parallel rank's samples into micro-batches itself.

With `Case.token_budget` set, `partition.per_rank[r]` is one group, the samples of data-parallel rank r, and the
engine cuts them into micro-batches as verl's `use_dynamic_bsz` with `ppo_max_token_len_per_gpu` does:

- the budget counts packed tokens: a micro-batch's samples' lengths summed (padding and a layout's widening not
  counted) are at most `max_tokens`;
- a sample is never split, so no sample may be longer than `max_tokens`;
- which samples share a micro-batch is the engine's choice (in order, or balanced as verl's is): the loss, the count
  and every gradient do not depend on it;
- every rank runs the same number of micro-steps: the most any rank's cut needs, agreed before the first (an
  all-reduce MAX over the data-parallel group). A rank whose cut needs fewer runs empty micro-batches that contribute
  exactly zero to the loss, the count and every gradient, yet issue every collective a micro-step issues (an FSDP
  unit's all-gathers in a forward, a vision tower's). A rank that leaves its loop early instead leaves its peers
  waiting in the next micro-step's collective: the step hangs (verl #6176, #6178).

`cut_in_order` is the cut the harness draws an arm's rows with (contract/rows.py), and the reference's: in order, a
sample that would take its micro-batch past the budget starts the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from packcheck.harness.contract.errors import ContractError


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenBudget:
    max_tokens: int

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ContractError(f"token_budget.max_tokens is {self.max_tokens!r}: give the most packed tokens a micro-batch may "
                                "hold, a positive int")

    def check(self, lengths: Sequence[int], per_rank: Sequence[Sequence[Sequence[int]]], where: str) -> None:
        """Raise ContractError naming the field and the fix: each rank one group, no sample longer than the budget."""
        for rank, groups in enumerate(per_rank):
            if len(groups) != 1:
                raise ContractError(
                    f"{where}: under a token_budget, partition.per_rank[{rank}] holds {len(groups)} micro-batches; give each rank "
                    "one group, its samples: the engine cuts them into micro-batches itself")
        too_long = [i for i, length in enumerate(lengths) if length > self.max_tokens]
        if too_long:
            raise ContractError(f"{where}: samples {too_long} are longer than token_budget.max_tokens={self.max_tokens}; a sample "
                                "is never split across micro-batches: raise max_tokens")

    def cut_in_order(self, lengths: Sequence[int]) -> list[list[int]]:
        """Positions in `lengths` per micro-batch: in order, a sample that would pass the budget starts the next."""
        cut: list[list[int]] = []
        free = 0
        for index, length in enumerate(lengths):
            if length > free:  # the first sample too: nothing is free before a micro-batch exists
                cut.append([])
                free = self.max_tokens
            cut[-1].append(index)
            free -= length
        return cut

    def describe(self) -> str:
        return f"token budget {self.max_tokens}"

    def to_json(self) -> dict:
        return {"max_tokens": self.max_tokens}

    @classmethod
    def from_json(cls, data: dict) -> TokenBudget:
        return cls(**data)
