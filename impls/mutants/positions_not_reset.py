"""mutant.positions-not-reset: position ids run on across the documents of a packed row.

Where it happened: nanoVLM #201, NeMo PR #12551. With RoPE and explicit boundaries a position
offset is invisible in exact arithmetic (attention scores depend only on relative positions), so
the bug bites where engines derive document boundaries from position resets, as transformers'
packed-sequence detection and flash-attention varlen paths do: positions that never reset mean
one long document. This mutant does what those engines do: boundaries from positions.
"""

from typing import Sequence

from dataclasses import replace

from packcheck.impls.reference.data.rows import segment_ids
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def positions_running_on(segment_lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    positions = list(range(sum(segment_lengths)))  # the bug: no reset per segment
    return positions, segment_ids(position == 0 for position in positions)  # a document starts where the position resets to 0


class PositionsNotReset(ReferenceEngine):
    name = "mutant.positions-not-reset"
    bug = "positions-not-reset"
    pipeline = replace(REFERENCE, positions_and_segments=positions_running_on)
