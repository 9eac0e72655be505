"""Document lengths moved by --seed: at a seed other than 0, the documents of a sample set get other
lengths, so that an engine keyed on the default lengths does not pass at every seed; seed 0 keeps
them, digest for digest (the goldens' inputs).

What a scenario needs of its documents stays where it is: only the boundary between two neighbours
packed in the same row (harness/contract/rows.py, in order) moves, so every row holds the same
documents and the same number of tokens, its first document still too long for the row before (a row a document exactly fills stays filled, a tail row
stays partial); a boundary moves only inside its quarter of the row, never onto a quarter mark, so
the context-parallel cuts (each quarter of a 48-token row is a cp-4 shard, half of it a cp-2 one)
fall inside, at the start of, or across the same documents as before; documents shorter than 4 tokens
(the length-1 and length-2 edge cases) keep their length, and none gets shorter than 3 or longer than
the longer of the two.

    varied(MIXED_DOCUMENTS, seq_len=48, seed=3)   # the same mask kinds, other lengths
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import pairwise

from packcheck.harness.contract.rows import pack_in_order

MIN_VARIED = 4  # a document this long or longer may change length; shorter ones are edge cases kept as they are
SHORTEST = 3


def varied(spec: Sequence[tuple[int, str]], seq_len: int, seed: int) -> tuple[tuple[int, str], ...]:
    """`spec` ((length, mask kind) pairs) with other lengths at `seed` (itself at seed 0), as the module says."""
    spec = tuple(spec)
    if seed == 0:
        return spec
    rng = random.Random(f"lengths/{seed}")
    lengths = [length for length, _ in spec]
    quarter = seq_len // 4 if seq_len % 4 == 0 else seq_len
    room = 0  # what the previous row left free: the first document of a row must still not fit there
    for row in pack_in_order(lengths, seq_len):
        offset, used = 0, set()
        for i, j in pairwise(row):
            offset += lengths[i]  # the row-relative boundary between documents i and j
            if i in used or lengths[i] < MIN_VARIED or lengths[j] < MIN_VARIED or offset % quarter == 0:
                continue
            start, end = offset - lengths[i], offset + lengths[j]
            low = max(offset // quarter * quarter + 1, start + SHORTEST, end - max(lengths[i], lengths[j]),
                      room + 1 if i == row[0] else 0)
            high = min(offset // quarter * quarter + quarter - 1, end - SHORTEST, start + max(lengths[i], lengths[j]))
            if low >= high:
                continue
            moved = rng.randint(low, high)
            lengths[i], lengths[j] = moved - start, end - moved
            offset = moved
            used.add(j)
        room = seq_len - sum(lengths[i] for i in row)
    return tuple((length, kind) for length, (_, kind) in zip(lengths, spec))
