"""Hypothesis strategies for samples and micro-batch partitions.

CI uses the derandomised `ci` profile registered in conftest.py, so every run draws the same
examples; `--hypothesis-profile=dev` explores.
"""

from __future__ import annotations

from hypothesis import strategies as st

from packcheck.harness.contract import Partition, Sample
from packcheck.harness.data.samples import MASKS, loss_mask

# Lengths drawn as often as all others together: a 1-token document (boundaries read from position resets lose the
# document after it: ms-swift #9903) and documents shorter than a short convolution's width less one (4 - 1 in the
# hybrid family: flash-linear-attention #1140); odd ones no cp divides.
EDGE_LENGTHS = (1, 2, 3)


def document_lengths(max_len: int) -> st.SearchStrategy[int]:
    """Any length in 1..max_len, the edge lengths as likely as all the others together."""
    return st.one_of(st.sampled_from(EDGE_LENGTHS), st.integers(1, max_len))


@st.composite
def samples(draw, vocab_size: int, max_len: int = 40, min_size: int = 2, max_size: int = 8) -> tuple[Sample, ...]:
    """Samples of skewed lengths (1..max_len, edge lengths often: EDGE_LENGTHS) with any mask shape, and a target
    predicted from two tokens or more (t >= 2) somewhere. Where every target is a document's token 1, every prediction
    attends to one token: the attention's query and key gradients vanish in exact arithmetic, and two layouts' rounding
    noise (1e-16) compared relative to each other reads as an O(1) error."""
    import random

    spec = draw(st.lists(st.tuples(document_lengths(max_len), st.sampled_from(MASKS)), min_size=min_size, max_size=max_size))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = random.Random(seed)
    out = tuple(Sample(input_ids=[rng.randrange(vocab_size) for _ in range(n)], loss_mask=loss_mask(n, kind, rng)) for n, kind in spec)
    if not any(t >= 2 and m for s in out for t, m in enumerate(s.loss_mask)):
        first = out[0]
        out = (Sample(input_ids=first.input_ids + (0, 1), loss_mask=first.loss_mask + (1, 1)),) + out[1:]
    return out


@st.composite
def partitions(draw, num_samples: int) -> Partition:
    """Any split of the samples, in any order, into 1..num_samples non-empty micro-batches."""
    order = draw(st.permutations(range(num_samples)))
    cuts = draw(st.sets(st.integers(1, num_samples - 1), max_size=num_samples - 1)) if num_samples > 1 else set()
    bounds = [0, *sorted(cuts), num_samples]
    return Partition.single_rank([order[a:b] for a, b in zip(bounds, bounds[1:])])
