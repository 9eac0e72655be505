"""Hypothesis strategies for samples and micro-batch partitions.

CI uses the derandomised `ci` profile registered in conftest.py, so every run draws the same
examples; `--hypothesis-profile=dev` explores.
"""

from __future__ import annotations

from hypothesis import strategies as st

from packcheck.harness.contract import Partition, Sample
from packcheck.harness.data.samples import MASKS, loss_mask


@st.composite
def samples(draw, vocab_size: int, max_len: int = 40, min_size: int = 2, max_size: int = 8) -> tuple[Sample, ...]:
    """Samples of skewed lengths (1..max_len) with any mask shape; at least one target overall."""
    import random

    spec = draw(st.lists(st.tuples(st.integers(1, max_len), st.sampled_from(MASKS)), min_size=min_size, max_size=max_size))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = random.Random(seed)
    out = tuple(Sample(input_ids=[rng.randrange(vocab_size) for _ in range(n)], loss_mask=loss_mask(n, kind, rng)) for n, kind in spec)
    if not any(s.num_targets for s in out):
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
