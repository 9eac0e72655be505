"""mutant.empty-microbatch-nan: each micro-batch's loss is its own sum over its own token count, with no guard.

Where it happens: the plain gradient-accumulation loop an adapter author writes first,
`loss = (nll * mask).sum() / mask.sum() / accumulation_steps` per micro-batch (the mean of means
of transformers before PR #34191, without its guard). A micro-batch whose samples carry no loss
token (all prompt, or fully masked) divides 0 by 0: the loss and every gradient come back NaN. On
the other micro-batches it is the mean-of-means bug: the update depends on the partition.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def own_count_weight(counts: Counts) -> float:
    # the bug: the micro-batch's own count, unguarded; a tensor division as in the loop above (1/0 = inf, and 0 * inf = NaN)
    return (torch.tensor(1.0, dtype=torch.float64) / counts.micro_tokens).item() / counts.micro_steps


class EmptyMicrobatchNan(ReferenceEngine):
    name = "mutant.empty-microbatch-nan"
    bug = "empty-microbatch-nan"
    pipeline = replace(REFERENCE, token_weight=own_count_weight)
