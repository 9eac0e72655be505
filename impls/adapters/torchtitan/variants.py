"""torchtitan variants: its Trainer with the loss normalised the way a user gets it wrong (negative controls on the GPU).

torchtitan.per-micro-batch-tokens: each micro-batch's sum cross-entropy divided by that micro-batch's
own valid-token count N_m (what a mean-reduced loss, or a custom loss ignoring the
`global_valid_tokens` train_step passes, computes) instead of the count over every micro-batch:
sum_m (sum_{t in m} l_t) / N_m instead of sum_t l_t / N. With micro-batches of unequal token counts
the loss and every gradient differ (microbatch_invariance flags it); torchtitan's own loss,
the main adapter's, divides by the global count.
"""

from __future__ import annotations

from packcheck.impls.adapters.torchtitan.batch import IGNORE_INDEX
from packcheck.impls.adapters.torchtitan.engine import Torchtitan
from packcheck.impls.adapters.torchtitan.trainer import CountingLoss


class PerMicroBatchTokensLoss(CountingLoss):
    """Records the global count train_step passes, divides by the micro-batch's own."""

    def __call__(self, pred, labels, global_valid_tokens=None, **kwargs):
        self.logged.valid_tokens.append(int(global_valid_tokens))
        local = (labels != IGNORE_INDEX).sum().to(global_valid_tokens)
        return self.loss_fn(pred, labels, local, **kwargs)


class TorchtitanPerMicroBatchTokens(Torchtitan):
    name = "torchtitan.per-micro-batch-tokens"
    loss_class = PerMicroBatchTokensLoss
