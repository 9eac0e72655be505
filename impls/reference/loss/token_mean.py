"""The token-mean loss normalised by the *global* loss-token count.

A micro-batch contributes -sum(logprobs * label_mask) * token_weight, where every token weighs
1 / (global loss tokens), so the sum over micro-batches (and ranks) is the global mean whatever
the partition.
"""

from __future__ import annotations


def token_weight(micro_tokens: int, global_tokens: int, micro_steps: int) -> float:
    """The weight of one loss token: 1 / global count, the same in every micro-batch."""
    return 1.0 / global_tokens
