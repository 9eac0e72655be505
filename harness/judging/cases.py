"""How a scenario's arms are built from a Setting: the seeded samples (with images for a vision-language family)
and a Case of them in a layout, a partition and the setting's model, dtype and device."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from packcheck.harness.compare import NOT_ARMS
from packcheck.harness.contract import Case, Layout, LayoutKind, Partition, Sample
from packcheck.harness.data.images import with_images
from packcheck.harness.data.lengths import varied
from packcheck.harness.data.samples import PACKED_AT, make_samples, scaled
from packcheck.harness.judging.judgement import Setting


def arm(setting: Setting, name: str, samples: Sequence[Sample], layout: Layout, partition: Partition | None = None, **fields) -> Case:
    assert name not in NOT_ARMS, f"arm name {name!r} is reserved for what arms are compared against"
    if setting.data_scale > 1 and layout.kind is LayoutKind.PACKED:  # the samples of samples_for are that much longer too
        layout = dataclasses.replace(layout, seq_len=layout.seq_len * setting.data_scale)
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
    return for_model(setting, make_samples(scaled(spec, setting.data_scale), setting.model.vocab_size, seed=setting.seed))


def input_seed(setting: Setting, base: int) -> int:
    """A scenario's own fixed seed (a perturbed document's), moved by the run's --seed; seed 0 keeps `base`."""
    return base + 100_003 * setting.seed


def for_model(setting: Setting, samples: Sequence[Sample], first: int = 0) -> tuple[Sample, ...]:
    """Text samples made fit for the setting's model: images placed for a vision-language family, else unchanged."""
    vision = setting.model.vision
    return tuple(samples) if vision is None else with_images(samples, vision, seed=setting.seed, first=first)
