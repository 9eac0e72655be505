"""One training sample: token ids and the loss mask aligned to them.

`loss_mask[t] == 1` means token t is a target predicted from tokens `< t`, so `loss_mask[0]` is
always 0 (nothing precedes token 0). Samples carry no padding: padding belongs to the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.contract.errors import ContractError


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_ids", tuple(int(t) for t in self.input_ids))
        object.__setattr__(self, "loss_mask", tuple(int(m) for m in self.loss_mask))

    def check(self, where: str, vocab_size: int) -> None:
        """Raise ContractError naming `where` (e.g. "samples[3]") if this sample is malformed."""
        n = len(self.input_ids)
        if n == 0:
            raise ContractError(f"{where}.input_ids is empty: a sample needs at least one token")
        if len(self.loss_mask) != n:
            raise ContractError(
                f"{where}.loss_mask has {len(self.loss_mask)} entries but input_ids has {n}: "
                "the loss mask is aligned to input_ids, one entry per token"
            )
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ContractError(f"{where}.loss_mask must contain only 0 and 1")
        if self.loss_mask[0] != 0:
            raise ContractError(
                f"{where}.loss_mask[0] = 1: token 0 has no preceding token to be predicted from; "
                "set loss_mask[0] = 0 (loss_mask[t] = 1 means token t is a target)"
            )
        bad = [t for t in self.input_ids if not 0 <= t < vocab_size]
        if bad:
            raise ContractError(f"{where}.input_ids has ids {bad[:3]} outside the vocabulary [0, {vocab_size})")

    @property
    def num_targets(self) -> int:
        return sum(self.loss_mask)

    def to_json(self) -> dict:
        return {"input_ids": list(self.input_ids), "loss_mask": list(self.loss_mask)}

    @classmethod
    def from_json(cls, data: dict) -> Sample:
        return cls(input_ids=data["input_ids"], loss_mask=data["loss_mask"])
