"""mutant.dp-count-world-group: the loss-token count is all-reduced over WORLD, not the DP group.

Where it happened: the verl Bumblebee engine review; transformers #39648. `all_reduce(count,
group=get_data_parallel_group())` with a group of None falls back to WORLD, so every rank of a
context-parallel group, which counted the same whole rows, adds its count again: the count is
cp times too large and the loss and every gradient cp times too small. Invisible when WORLD is
the DP group (pure data parallelism).
"""

import torch

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def count_over_world(micro_tokens: list[int], shard_tokens: int, mesh: Mesh) -> int:
    return int(mesh.all_reduce(torch.tensor([sum(micro_tokens)], dtype=torch.float64), "world").item())  # the bug: WORLD


class DpCountWorldGroup(ReferenceEngine):
    name = "mutant.dp-count-world-group"
    bug = "dp-count-world-group"
    pipeline = replace(REFERENCE, global_token_count=count_over_world)
