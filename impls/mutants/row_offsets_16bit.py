"""mutant.row-offsets-16bit: a packed row's document offsets kept in 16 bits, so tokens past 65,536 of a row take the
boundaries of the row's start.

Where it happened: state-spaces/mamba #1015 (offsets of a packed sequence wrap in a kernel's narrow integers once a
row passes 65,536 tokens), the class of any kernel that indexes a row's tokens or blocks with 16 bits or a grid
dimension (65,535 at most). Here the document a token belongs to is looked up at its index modulo 65,536: every row
up to 65,536 tokens is exact, and a document crossing token 65,536 sends its tail to the row's first document. Only
packed_vs_unpacked's GPU arms build such a row (a 65,565-token row; docs/gpu.md).
"""

from bisect import bisect_right
from dataclasses import replace
from typing import Sequence

from packcheck.impls.reference.data.rows import positions_and_segments
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE

WRAP = 1 << 16


def segments_from_16bit_offsets(segment_lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    positions, _ = positions_and_segments(segment_lengths)
    starts, offset = [], 0
    for length in segment_lengths:
        starts.append(offset)
        offset += length
    return positions, [bisect_right(starts, t % WRAP) - 1 for t in range(offset)]  # the bug: t % WRAP


class RowOffsets16bit(ReferenceEngine):
    name = "mutant.row-offsets-16bit"
    bug = "row-offsets-16bit"
    pipeline = replace(REFERENCE, positions_and_segments=segments_from_16bit_offsets)
