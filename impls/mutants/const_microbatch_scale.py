"""mutant.const-microbatch-scale: each micro-batch's mean loss is scaled by a constant.

Where it happened: the verl Bumblebee engine review; verl #2857 / PR #3332. The loss function
returns the micro-batch's token mean and the engine multiplies it by
batch_tokens / (dp * n_micro) / batch_tokens instead of the micro-batch's own token share:
exact only when every micro-batch has the same number of loss tokens.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE

DP = 1


def constant_scale_weight(counts: Counts) -> float:
    loss_scale = counts.global_tokens / (DP * counts.micro_steps)  # the bug: one constant for every micro-batch
    return loss_scale / max(counts.micro_tokens, 1) / counts.global_tokens


class ConstMicrobatchScale(ReferenceEngine):
    name = "mutant.const-microbatch-scale"
    bug = "const-microbatch-scale"
    pipeline = replace(REFERENCE, token_weight=constant_scale_weight)
