"""Which configurations of a kernel fail, said as a range: the head dims (as a rule where one fits, "head_dim % 32 != 0")
and the head ratios, from the verdicts of one kernel at one dtype and device."""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.kernels.shapes import Configuration

MULTIPLES = (256, 128, 64, 32, 16)  # the largest first: "% 32" is said where "% 16" would fit the failing dims too


@dataclass(frozen=True, kw_only=True, slots=True)
class Range:
    head_dims: tuple[int, ...]  # failing at some ratio
    ratios: tuple[int, ...]  # failing at some head dim
    multiple: int | None  # the failing head dims are exactly those tested that are not a multiple of this
    every_ratio: bool  # each failing head dim fails at every ratio tested

    def describe(self) -> str:
        if not self.head_dims:
            return "no configuration fails"
        dims = (f"head_dim % {self.multiple} != 0 ({', '.join(map(str, self.head_dims))})" if self.multiple
                else f"head dims {', '.join(map(str, self.head_dims))}")
        ratios = "at every head ratio tested" if self.every_ratio else f"at head ratios {', '.join(map(str, self.ratios))}"
        return f"fails where {dims}, {ratios}"


def failing_range(outcomes: dict[Configuration, bool]) -> Range:
    """`outcomes`: whether each configuration tested failed."""
    failing = [c for c, failed in outcomes.items() if failed]
    head_dims = tuple(sorted({c.head_dim for c in failing}))
    tested_dims = {c.head_dim for c in outcomes}
    multiple = next((m for m in MULTIPLES if set(head_dims) == {d for d in tested_dims if d % m} and head_dims), None)
    tested_ratios = {c.ratio for c in outcomes}
    every_ratio = all({c.ratio for c in failing if c.head_dim == d} == tested_ratios for d in head_dims)
    return Range(head_dims=head_dims, ratios=tuple(sorted({c.ratio for c in failing})), multiple=multiple, every_ratio=every_ratio)
