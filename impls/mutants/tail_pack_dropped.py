"""mutant.tail-pack-dropped: the last, partial pack of a micro-batch is dropped.

Where it happened: prime-rl before the seq_lens contract PR (the iterator only yielded full
packs). The samples of the tail pack never reach the model: fewer loss tokens, and the engine
cannot report them.
"""

from typing import Sequence

from dataclasses import replace

from packcheck.impls.reference.data.packing import pack_rows
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def pack_full_rows_only(lengths: Sequence[int], seq_len: int) -> list[list[int]]:
    rows = pack_rows(lengths, seq_len)
    if len(rows) > 1 and sum(lengths[i] for i in rows[-1]) < seq_len:
        rows = rows[:-1]  # the bug: the partial tail pack is not yielded
    return rows


class TailPackDropped(ReferenceEngine):
    name = "mutant.tail-pack-dropped"
    bug = "tail-pack-dropped"
    pipeline = replace(REFERENCE, pack_rows=pack_full_rows_only)
