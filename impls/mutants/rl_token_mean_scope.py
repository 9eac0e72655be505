"""mutant.rl-token-mean-scope: the policy loss's token-mean is taken over each micro-batch.

Where it happened: verl #2776 (DAPO's token-mean taken over the local batch, not the group /
global batch); open-instruct PR #1161. Each micro-batch averages its own tokens and gradient
accumulation divides by the number of micro-steps: a mean of means, exact only when every
micro-batch holds the same number of loss tokens.
"""

from dataclasses import replace

from packcheck.harness.contract import Aggregation, LossSpec
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.aggregation import aggregation_weights
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def micro_batch_token_mean_weights(spec: LossSpec, predictions: Predictions, counts: Counts):
    if spec.aggregation is Aggregation.TOKEN_MEAN:
        return predictions.label_mask_BT.cpu().double() / counts.micro_tokens / counts.micro_steps  # the bug: local count
    return aggregation_weights(spec, predictions, counts)


class RlTokenMeanScope(ReferenceEngine):
    name = "mutant.rl-token-mean-scope"
    bug = "rl-token-mean-scope"
    pipeline = replace(REFERENCE, aggregation_weights=micro_batch_token_mean_weights)
