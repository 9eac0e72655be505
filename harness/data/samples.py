"""Seeded sample sets: the fixed edge cases every scenario draws from.

The traits come from BUGS.md: most packing bugs vanish when micro-batches, rows or documents have
equal token counts, so lengths are skewed; rows hold several documents; there are length-1 and
length-2 documents, fully masked samples, samples whose first target is masked, prompt/response
and multi-turn masks.
"""

from __future__ import annotations

import random
from typing import Sequence

from packcheck.harness.contract import Sample

MASKS = ("response", "all", "none", "turns", "first_target_masked")


def loss_mask(length: int, kind: str, rng: random.Random) -> tuple[int, ...]:
    """A loss mask of one of the MASKS shapes; position 0 is never a target."""
    if kind == "all":
        mask = [1] * length
    elif kind == "none":
        mask = [0] * length
    elif kind == "response":
        prompt = rng.randint(1, max(1, length - 1))
        mask = [0] * prompt + [1] * (length - prompt)
    elif kind == "turns":
        mask, value = [], 0
        while len(mask) < length:
            mask += [value] * rng.randint(1, 4)
            value ^= 1
        mask = mask[:length]
    elif kind == "first_target_masked":
        mask = [0, 0] + [1] * (length - 2)
    else:
        raise ValueError(f"unknown mask kind {kind!r}; known: {MASKS}")
    mask[0] = 0
    return tuple(mask[:length])


def make_samples(spec: Sequence[tuple[int, str]], vocab_size: int, seed: int) -> tuple[Sample, ...]:
    """Samples from (length, mask kind) pairs, token ids drawn uniformly from the vocabulary."""
    rng = random.Random(seed)
    return tuple(
        Sample(input_ids=[rng.randrange(vocab_size) for _ in range(length)], loss_mask=loss_mask(length, kind, rng))
        for length, kind in spec
    )


def scaled(spec: Sequence[tuple[int, str]], scale: int) -> tuple[tuple[int, str], ...]:
    """`spec` with every document `scale` times longer, for a row `scale` times longer: the same documents per row,
    the same row a document exactly fills, the same shard cut a document starts at, straddles or ends before.
    Length-1 documents stay length 1 (the document before one absorbs its scale - 1 tokens; the one after, for a
    first), so the edge case survives at any size."""
    if scale < 1:
        raise ValueError(f"data scale {scale} must be a positive integer")
    lengths = [length * scale for length, _ in spec]
    for i, (length, _) in enumerate(spec):
        if length == 1 and scale > 1:
            lengths[i] = 1
            longer = [j for j in range(i - 1, -1, -1) if spec[j][0] > 1] or [j for j in range(i + 1, len(spec)) if spec[j][0] > 1]
            if longer:
                lengths[longer[0]] += scale - 1
    return tuple((length, kind) for length, (_, kind) in zip(lengths, spec))


def perturbed(sample: Sample, vocab_size: int, seed: int, length: int | None = None) -> Sample:
    """Other tokens (and optionally another length) with the same kind of mask: a changed document."""
    rng = random.Random(seed)
    length = len(sample.input_ids) if length is None else length
    ids = [rng.randrange(vocab_size) for _ in range(length)]
    mask = (list(sample.loss_mask) + [1] * length)[:length]
    mask[0] = 0
    return Sample(input_ids=ids, loss_mask=mask)


# Several documents per packed row (seq_len 48), uneven lengths, a length-1 document with a long one right after it in
# its row (boundaries read from position resets lose the one after it: ms-swift #9903), a length-2 document (shorter
# than a short convolution's width less one: flash-linear-attention #1140), a fully masked document, and a row whose
# first document is not the longest.
MIXED_DOCUMENTS = ((17, "response"), (3, "all"), (1, "none"), (26, "turns"), (9, "all"), (2, "all"),
                   (23, "response"), (12, "none"), (5, "first_target_masked"), (14, "all"))

# Token counts per micro-batch differ by an order of magnitude when split in order.
SKEWED_LENGTHS = ((40, "all"), (2, "all"), (3, "response"), (31, "turns"), (1, "none"), (12, "all"),
                  (6, "response"), (44, "all"), (4, "all"))

# Loss-mask edge cases: first target masked, fully masked, length 1 and 2, alternating turns,
# a response at the very end.
MASK_EDGE_CASES = ((9, "first_target_masked"), (6, "none"), (1, "none"), (2, "all"), (21, "turns"),
                   (13, "response"), (3, "first_target_masked"), (17, "all"), (8, "turns"))

# With seq_len 32: one sample exactly fills a row, two samples exactly fill the next, one overflows
# into a new row, and the last row is a partial tail pack.
CONSERVATION = ((32, "all"), (10, "response"), (22, "all"), (5, "turns"), (30, "all"), (7, "response"),
                (3, "all"), (11, "first_target_masked"))
CONSERVATION_SEQ_LEN = 32

# Context-parallel cuts of a 48-token row fall at 24 (cp 2) and 12, 24, 36 (cp 4). First row: a
# document exactly filling the first cp-4 shard, a length-1 document right before the cp-2 cut,
# a document starting exactly at it and crossing the next cut. Second row: a document crossing
# two cuts, a length-1 document, trailing padding. Third: a partial tail row.
CP_CUTS_SEQ_LEN = 48
CP_CUTS = ((12, "all"), (11, "response"), (1, "none"), (20, "turns"), (4, "all"),
           (30, "response"), (7, "all"), (5, "first_target_masked"), (1, "none"),
           (17, "all"), (3, "all"))

# The row length each sample set is packed at (its scenarios' seq_len): --seed moves lengths only inside these rows'
# quarters (harness/data/lengths.py). A set not named here keeps its lengths at every seed.
PACKED_AT = {MIXED_DOCUMENTS: 48, SKEWED_LENGTHS: 48, MASK_EDGE_CASES: 40, CONSERVATION: CONSERVATION_SEQ_LEN, CP_CUTS: CP_CUTS_SEQ_LEN}
