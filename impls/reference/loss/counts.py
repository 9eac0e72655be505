"""The counts a micro-batch's loss weights may depend on, taken from the rows the engine built.

A correct engine uses only the global ones (over every micro-batch, and in a distributed engine
over every DP rank after an all-reduce, before the first backward); the micro-batch's own count,
its shard's and the number of micro-steps are here because the bugs that use them must be expressible as
one replaced function.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from packcheck.impls.reference.data.predictions import Predictions


@dataclass(frozen=True, slots=True)
class Counts:
    global_tokens: int  # N: loss targets in the global batch
    global_sequences: int  # G: samples with at least one target
    sample_tokens: Mapping[int, int]  # |S_i|: the targets of each sample, over its whole length
    micro_tokens: int  # this micro-batch's targets
    micro_steps: int  # micro-batches in the step
    shard_tokens: int = 0  # this micro-batch's targets in this rank's context-parallel shard (the step fills it in)
    shards: int = 1  # the context-parallel group's size


def count_targets(micro_batches: Sequence[Sequence[Predictions]]) -> list[Counts]:
    """One Counts per micro-batch, every count made before any backward, as a real trainer must.
    The global counts are this rank's until the step all-reduces them over data-parallel ranks."""
    per_sample: Counter[int] = Counter()
    micro_tokens = []
    for forwards in micro_batches:
        tokens = 0
        for predictions in forwards:
            targets = predictions.label_mask_BT.bool()
            tokens += int(targets.sum())
            per_sample.update(predictions.label_sample_BT[targets].tolist())
        micro_tokens.append(tokens)
    total = sum(micro_tokens)
    return [Counts(total, len(per_sample), per_sample, tokens, len(micro_batches)) for tokens in micro_tokens]
