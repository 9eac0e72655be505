"""mutant.ga-mean-of-means: gradient accumulation averages per-micro-batch means.

Where it happened: transformers before PR #34191 (2024). Each micro-batch's loss is its own token
mean, divided by the number of accumulation steps: the update is biased toward short
micro-batches and depends on the partition.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def mean_of_means_weight(counts: Counts) -> float:
    return 1.0 / max(counts.micro_tokens, 1) / counts.micro_steps  # the bug: local mean / accumulation steps


class GaMeanOfMeans(ReferenceEngine):
    name = "mutant.ga-mean-of-means"
    bug = "ga-mean-of-means"
    pipeline = replace(REFERENCE, token_weight=mean_of_means_weight)
