"""The token-mean loss normalised by the *global* loss-token count.

A micro-batch contributes -sum(logprobs * label_mask) * token_weight, where every token weighs
1 / (global loss tokens), so the sum over micro-batches (and ranks) is the global mean whatever
the partition.
"""

from __future__ import annotations

from packcheck.impls.reference.loss.counts import Counts


def token_weight(counts: Counts) -> float:
    """The weight of one loss token: 1 / global count, the same in every micro-batch."""
    return 1.0 / counts.global_tokens
