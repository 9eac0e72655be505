"""mutant.seq-mean-over-row: seq-mean-token-mean takes each packed row for one sequence.

Not in BUGS.md (docs/rl-losses.md, "bugs beyond BUGS.md"). A loss written for [batch, response]
tensors (verl's agg_loss: `sum(loss * mask, dim=-1) / sum(mask, dim=-1)`) is applied to packed
rows, so the per-sequence token mean runs over every document of the row at once: the
packed-SFT weighting problem of THUDM/LongAlign #3 and unsloth #1216, and the per-row sequence
count of alibaba/Pai-Megatron-Patch #533, in an RL loss. Unpacked rows hold one sample each and
stay exact; packed rows weight long documents up and short ones down.
"""

import torch

from dataclasses import replace

from packcheck.harness.contract import Aggregation, LossSpec
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.aggregation import aggregation_weights
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def row_token_mean_weights(spec: LossSpec, predictions: Predictions, counts: Counts) -> torch.Tensor:
    if spec.aggregation is Aggregation.SEQ_MEAN_TOKEN_MEAN:
        mask_BT = predictions.label_mask_BT.cpu().double()
        row_tokens_B1 = mask_BT.sum(dim=-1, keepdim=True).clamp(min=1)  # the bug: dim=-1 of a packed row is not a sequence
        return mask_BT / (counts.global_sequences * row_tokens_B1)
    return aggregation_weights(spec, predictions, counts)


class SeqMeanOverRow(ReferenceEngine):
    name = "mutant.seq-mean-over-row"
    bug = "seq-mean-over-row"
    pipeline = replace(REFERENCE, aggregation_weights=row_token_mean_weights)
