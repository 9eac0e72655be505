"""mutant.cp-empty-shard-nan: under context parallelism each rank divides its shard's loss by its shard's own token count.

Where it happened: Megatron-LM #1764 (also mcore-bridge PR #104, OLMo-core PR #657). Each CP rank computed
loss_sum / num_tokens over its own part of the sequence and the CP group averaged the results. A short document padded
to the CP length leaves a rank whose shard holds no loss token: 0 / 0 = NaN, and the gradient all-reduce spreads it to
every gradient on every rank. Where every shard holds tokens it is a mean of per-shard means, wrong too (cp_vs_nocp);
an empty shard makes it NaN. A tensor division, as in the trainer (1/0 = inf, and 0 * inf = NaN).
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def shard_mean_weight(counts: Counts) -> float:
    # the bug: the shard's own count, unguarded, then the mean over the CP group and the micro-steps
    return (torch.tensor(1.0, dtype=torch.float64) / counts.shard_tokens).item() / (counts.shards * counts.micro_steps)


class CpEmptyShardNan(ReferenceEngine):
    name = "mutant.cp-empty-shard-nan"
    bug = "cp-empty-shard-nan"
    pipeline = replace(REFERENCE, token_weight=shard_mean_weight)
