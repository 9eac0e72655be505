"""mutant.rl-seq-tokens-per-shard: under context parallelism, |S_i| of seq-mean-token-mean is
counted in this rank's shard of the row, not over the whole sample.

The RL form of local-seq-lens-under-cp: the per-sequence token mean divides each shard's token
sum by the tokens of that sample *in the shard*, so a sample cut by a CP boundary is averaged per
piece and weighs as many sequences as it has pieces. Without CP a sample is never cut and the
count is right, so only CP arms can see it.
"""

import torch

from dataclasses import replace

from packcheck.harness.contract import Aggregation, LossSpec
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.aggregation import aggregation_weights
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def shard_token_mean_weights(spec: LossSpec, predictions: Predictions, counts: Counts) -> torch.Tensor:
    if spec.aggregation is Aggregation.SEQ_MEAN_TOKEN_MEAN:
        mask_BT = predictions.label_mask_BT.cpu().double()
        samples_BT = predictions.label_sample_BT.cpu()
        in_shard_BT = torch.ones_like(mask_BT)
        for sample in samples_BT.unique().tolist():
            where = samples_BT == sample
            in_shard_BT[where] = mask_BT[where].sum().clamp(min=1)  # the bug: this shard's targets of the sample
        return mask_BT / (counts.global_sequences * in_shard_BT)
    return aggregation_weights(spec, predictions, counts)


class RlSeqTokensPerShard(ReferenceEngine):
    name = "mutant.rl-seq-tokens-per-shard"
    bug = "rl-seq-tokens-per-shard"
    pipeline = replace(REFERENCE, aggregation_weights=shard_token_mean_weights)
