"""mutant.rl-token-mean-scope: the policy loss's token-mean is taken over each micro-batch.

Where it happened: verl #2776 (DAPO's token-mean taken over the local batch, not the group /
global batch); open-instruct PR #1161. Each micro-batch averages its own tokens and gradient
accumulation divides by the number of micro-steps: a mean of means, exact only when every
micro-batch holds the same number of loss tokens.
"""

from harness.contract import Aggregation, LossSpec
from impls.reference.aggregation import aggregation_weights
from impls.reference.counts import Counts
from impls.reference.engine import ReferenceEngine
from impls.reference.predictions import Predictions


def micro_batch_token_mean_weights(spec: LossSpec, predictions: Predictions, counts: Counts):
    if spec.aggregation is Aggregation.TOKEN_MEAN:
        return predictions.label_mask_BT.cpu().double() / counts.micro_tokens / counts.micro_steps  # the bug: local count
    return aggregation_weights(spec, predictions, counts)


class RlTokenMeanScope(ReferenceEngine):
    name = "mutant.rl-token-mean-scope"
    bug = "rl-token-mean-scope"
    aggregation_weights = staticmethod(micro_batch_token_mean_weights)
