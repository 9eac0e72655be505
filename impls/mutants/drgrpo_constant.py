"""mutant.drgrpo-constant: seq-mean-token-sum-norm is divided by the micro-batch's padded length.

Where it happened: verl #3741, fixed by PR #4360 (loss_scale_factor) and PR #5366. agg_loss
divided the token sums by `loss_mask.shape[-1]`, the padded width of the micro-batch, instead of
a constant, and gradient accumulation then divided by the number of micro-steps: loss and
gradients scale with the micro-batch size and move with every micro-batch's longest sample.
"""

from dataclasses import replace

from packcheck.harness.contract import Aggregation, LossSpec
from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.aggregation import aggregation_weights
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def padded_width_norm_weights(spec: LossSpec, predictions: Predictions, counts: Counts):
    if spec.aggregation is Aggregation.SEQ_MEAN_TOKEN_SUM_NORM:
        width = predictions.label_mask_BT.cpu().shape[-1]  # the bug: loss_mask.shape[-1], not loss.norm_constant
        return predictions.label_mask_BT.cpu().double() / width / counts.micro_steps
    return aggregation_weights(spec, predictions, counts)


class DrGrpoConstant(ReferenceEngine):
    name = "mutant.drgrpo-constant"
    bug = "drgrpo-constant"
    pipeline = replace(REFERENCE, aggregation_weights=padded_width_norm_weights)
