"""How an engine must lay the samples of a micro-batch out in tensors.

- `unpacked`: one sample per row, rows padded to the longest sample of the micro-batch on
  `padding_side`.
- `packed`: samples concatenated in order into rows of exactly `seq_len` tokens; a sample that
  does not fit starts the next row; the rest of a row is padding, which is its own masked
  segment; the last partial row is kept; a sample longer than `seq_len` is an error.
- `stacked`: samples bucketed by length (`ceil(len / bucket_width)`), each bucket one padded
  tensor: several forwards per micro-batch under one normaliser.

`padding_side` also fixes the side of any padded intermediate an engine builds (many engines
receive a padded batch and unpad it to pack), so mask-slicing bugs of that step show up.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from packcheck.harness.contract.errors import ContractError


class LayoutKind(StrEnum):
    UNPACKED = "unpacked"
    PACKED = "packed"
    STACKED = "stacked"


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    kind: LayoutKind
    seq_len: int | None = None
    padding_side: str = "right"
    bucket_width: int = 16

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LayoutKind(self.kind))
        if self.padding_side not in ("left", "right"):
            raise ContractError(f"layout.padding_side is {self.padding_side!r}: use 'left' or 'right'")
        if self.kind is LayoutKind.PACKED and (self.seq_len is None or self.seq_len < 1):
            raise ContractError("layout.seq_len must be a positive int for a packed layout")
        if self.kind is not LayoutKind.PACKED and self.seq_len is not None:
            raise ContractError(f"layout.seq_len is only meaningful for packed layouts, not {self.kind}")
        if self.bucket_width < 1:
            raise ContractError("layout.bucket_width must be >= 1")

    def describe(self) -> str:
        if self.kind is LayoutKind.PACKED:
            return f"packed(seq_len={self.seq_len}, pad={self.padding_side})"
        if self.kind is LayoutKind.STACKED:
            return f"stacked(bucket_width={self.bucket_width}, pad={self.padding_side})"
        return f"unpacked(pad={self.padding_side})"

    def to_json(self) -> dict:
        return {
            "kind": self.kind.value,
            "seq_len": self.seq_len,
            "padding_side": self.padding_side,
            "bucket_width": self.bucket_width,
        }

    @classmethod
    def from_json(cls, data: dict) -> Layout:
        return cls(**data)


UNPACKED = Layout(kind=LayoutKind.UNPACKED)


def packed(seq_len: int, padding_side: str = "right") -> Layout:
    return Layout(kind=LayoutKind.PACKED, seq_len=seq_len, padding_side=padding_side)
