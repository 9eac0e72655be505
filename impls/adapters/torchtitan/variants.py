"""torchtitan variants: its Trainer fed or normalised the way a user gets it wrong (negative controls on the GPU).

torchtitan.per-micro-batch-tokens: each micro-batch's sum cross-entropy divided by that micro-batch's
own valid-token count N_m (what a mean-reduced loss, or a custom loss ignoring the
`global_valid_tokens` train_step passes, computes) instead of the count over every micro-batch:
sum_m (sum_{t in m} l_t) / N_m instead of sum_t l_t / N. With micro-batches of unequal token counts
the loss and every gradient differ (microbatch_invariance flags it); torchtitan's own loss,
the main adapter's, divides by the global count. A micro-batch without targets is divided by 1 (its
sum is 0), as a guarded mean does: unguarded, 0/0 stops torchtitan's step with a non-finite loss.

torchtitan.row-positions: positions counted over the whole row (0..seq_len-1, what a loader that
does not know about packing yields) instead of from 0 per document. torchtitan finds documents
where positions reset, so a packed row becomes one causal sequence: each document after the first
attends to the ones before it and is rotated by its row offset (packed_vs_unpacked and
document_isolation flag it). This is the proof that those scenarios can fail on torchtitan's own
flex path, where the main adapter's packed and unpacked bfloat16 arms agree bit for bit.
"""

from __future__ import annotations

import torch

from packcheck.impls.adapters.torchtitan import batch as batches
from packcheck.impls.adapters.torchtitan.batch import IGNORE_INDEX
from packcheck.impls.adapters.torchtitan.engine import Torchtitan
from packcheck.impls.adapters.torchtitan.trainer import CountingLoss


class PerMicroBatchTokensLoss(CountingLoss):
    """Records the global count train_step passes, divides by the micro-batch's own."""

    def __call__(self, pred, labels, global_valid_tokens=None, **kwargs):
        self.logged.valid_tokens.append(int(global_valid_tokens))
        local = (labels != IGNORE_INDEX).sum().clamp(min=1).to(global_valid_tokens)
        return self.loss_fn(pred, labels, local, **kwargs)


class TorchtitanPerMicroBatchTokens(Torchtitan):
    name = "torchtitan.per-micro-batch-tokens"
    loss_class = PerMicroBatchTokensLoss


def row_positions(data: list[batches.MicroBatch]) -> list[batches.MicroBatch]:
    """Each micro-batch with its positions counted over the row, 0..width-1, on every row."""
    return [batches.MicroBatch(mb.inputs_RT, torch.arange(mb.inputs_RT.shape[1]).expand_as(mb.inputs_RT).clone(), mb.labels_RT)
            for mb in data]


class TorchtitanRowPositions(Torchtitan):
    name = "torchtitan.row-positions"

    def micro_batches(self, case):
        data, spans = super().micro_batches(case)
        return row_positions(data), spans
