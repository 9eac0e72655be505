"""mutant.vision-skip-hang: a rank whose micro-batch holds no image skips the vision tower.

Where it happened: prime-rl PRs #1918/#1959, LLaMA-Factory PR #6233. Skipping the tower on a
text-only micro-batch changes no number (no placeholder needs a feature), but with the tower
sharded by FSDP each tower forward is an all-gather on every rank: the rank that skips it goes
on to the next collective while its peers wait in the all-gather, and the step deadlocks.
"""

import dataclasses
from typing import Sequence

import torch
from torch import nn

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE
from packcheck.impls.reference.step.vision_step import encode_micro_batch


def skip_tower_without_images(model: nn.Module, forwards: Sequence[Predictions]) -> list[torch.Tensor | None]:
    if all(p.images is None or p.images.num_tokens == 0 for p in forwards):
        return [None] * len(forwards)  # the bug: nothing to encode, so no tower (and no all-gather) on this rank
    return encode_micro_batch(model, forwards)


class VisionSkipHang(ReferenceEngine):
    name = "mutant.vision-skip-hang"
    bug = "vision-skip-hang"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen2_5_vl"}))
    pipeline = dataclasses.replace(REFERENCE, image_features=skip_tower_without_images)
