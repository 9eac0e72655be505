"""mutant.one-token-doc-merged: document boundaries read from position resets miss the document after a 1-token one.

Where it happened: ms-swift #9903. Boundaries were recovered from the packed position ids, a document starting where
the position drops below the previous one. After a 1-token document the next document's position 0 follows a 0, no
drop: the two are read as one document, and the next document attends to the 1-token one. Positions stay correct
(they reset per document); only the boundaries derived from them lose one. Every row without a 1-token document
followed by another is exact, so only data with that edge shape shows it.
"""

from dataclasses import replace
from typing import Sequence

from packcheck.impls.reference.data.rows import positions_and_segments, segment_ids
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def segments_from_position_drops(segment_lengths: Sequence[int]) -> tuple[list[int], list[int]]:
    positions, _ = positions_and_segments(segment_lengths)
    # the bug: a reset after a 0 is no drop
    return positions, segment_ids(t == 0 or position < positions[t - 1] for t, position in enumerate(positions))


class OneTokenDocMerged(ReferenceEngine):
    name = "mutant.one-token-doc-merged"
    bug = "one-token-doc-merged"
    pipeline = replace(REFERENCE, positions_and_segments=segments_from_position_drops)
