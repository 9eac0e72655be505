"""How a scenario's arms are built from a Setting: the seeded samples (with images for a vision-language family)
and a Case of them in a layout, a partition and the setting's model, dtype and device; with the setting's
`smaller` (harness/data/smaller.py, what the shrinker tries), the samples kept and cut and every arm's partition,
mesh and rows made smaller here, the one place samples are drawn and arms made."""

from __future__ import annotations

import dataclasses
import random
from itertools import pairwise
from typing import Sequence

from packcheck.harness.compare import NOT_ARMS
from packcheck.harness.contract import Case, Layout, LayoutKind, Partition, Sample
from packcheck.harness.data.images import with_images
from packcheck.harness.data.lengths import varied
from packcheck.harness.data.samples import PACKED_AT, make_samples, scaled
from packcheck.harness.judging.judgement import Setting


def arm(setting: Setting, name: str, samples: Sequence[Sample], layout: Layout, partition: Partition | None = None, **fields) -> Case:
    """A Case of `samples` (samples_for's); `partition` names them by their index in the scenario's full set (its
    constants), mapped onto the samples kept where the setting is smaller."""
    assert name not in NOT_ARMS, f"arm name {name!r} is reserved for what arms are compared against"
    if setting.data_scale > 1 and layout.kind is LayoutKind.PACKED:  # the samples of samples_for are that much longer too
        layout = dataclasses.replace(layout, seq_len=layout.seq_len * setting.data_scale)
    if setting.data_scale > 1 and (budget := fields.get("token_budget")) is not None:  # likewise
        fields = fields | {"token_budget": dataclasses.replace(budget, max_tokens=budget.max_tokens * setting.data_scale)}
    if (smaller := setting.smaller) is not None:
        partition = None if partition is None else smaller.partition(partition)
        fields = fields | ({"parallel": smaller.parallel(fields["parallel"])} if "parallel" in fields else {})
        layout = dataclasses.replace(layout, seq_len=smaller.row_length(layout.seq_len)) if layout.kind is LayoutKind.PACKED else layout
    return Case(
        name=name,
        model=setting.model,
        samples=tuple(samples),
        layout=layout,
        partition=partition or Partition.all_in_one(len(samples)),
        dtype=setting.dtype,
        device=setting.device,
        **{"attention": setting.attention, **fields},
    )


def samples_for(setting: Setting, spec) -> tuple[Sample, ...]:
    """The seeded samples of `spec`, their lengths moved by a seed other than 0 (harness/data/lengths.py); for a
    vision-language family, with 0, 1 or 2 images each (harness/data/images.py)."""
    if tuple(spec) in PACKED_AT:
        spec = varied(spec, PACKED_AT[tuple(spec)], setting.seed)
    return kept(setting, for_model(setting, make_samples(scaled(spec, setting.data_scale), setting.model.vocab_size, seed=setting.seed)))


def kept(setting: Setting, samples: Sequence[Sample]) -> tuple[Sample, ...]:
    """A scenario's full sample set as the setting keeps it: all of it, or (smaller) the documents kept, cut."""
    return tuple(samples) if setting.smaller is None else setting.smaller.samples(samples)


def positions(setting: Setting, indices) -> list[tuple[int, int]]:
    """(index in the scenario's full set, position among the samples kept) of each of `indices` still there: how a
    scenario that names samples by index (a perturbed document, a watched one) finds them in a smaller setting."""
    return [(i, i) for i in indices] if setting.smaller is None else setting.smaller.positions(indices)

def seeded_partition(setting: Setting, fixed: Partition) -> Partition:
    """`fixed` at seed 0; at another seed, as many micro-batches per rank, every sample in one of them, but other
    samples sharing a micro-batch (and so a packed row), in another order: a partition an engine cannot key on."""
    if setting.seed == 0:
        return fixed
    rng = random.Random(f"partition/{setting.seed}/{fixed.describe()}")
    indices = [i for rank in fixed.per_rank for mb in rank for i in mb]
    rng.shuffle(indices)
    sizes = [len(mb) for rank in fixed.per_rank for mb in rank]
    rng.shuffle(sizes)
    cuts = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    micro_batches = [tuple(indices[a:b]) for a, b in pairwise(cuts)]
    per_rank, taken = [], 0
    for rank in fixed.per_rank:
        per_rank.append(tuple(micro_batches[taken:taken + len(rank)]))
        taken += len(rank)
    return Partition(per_rank=tuple(per_rank))


def input_seed(setting: Setting, base: int) -> int:
    """A scenario's own fixed seed (a perturbed document's), moved by the run's --seed; seed 0 keeps `base`."""
    return base + 100_003 * setting.seed


def for_model(setting: Setting, samples: Sequence[Sample], first: int = 0) -> tuple[Sample, ...]:
    """Text samples made fit for the setting's model: images placed for a vision-language family, else unchanged."""
    vision = setting.model.vision
    return tuple(samples) if vision is None else with_images(samples, vision, seed=setting.seed, first=first)
