"""What a CausalLM returns instead of logits when its loss takes log-probs chunk by chunk: the final
hidden states and the lm_head weight (impls/reference/loss/chunked_logprobs.py multiplies them one chunk
of tokens at a time, so the full [B, T, V] logits never exist).

A NamedTuple, so DistributedDataParallel and pytree walk into it like a tuple of two tensors.

Shapes: B batch, T sequence, C hidden_size, V vocab_size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class LmHeadInputs(NamedTuple):
    hidden_BTC: torch.Tensor  # after the final norm
    weight_VC: torch.Tensor  # lm_head.weight (the embedding's when tied)

    def logits(self) -> torch.Tensor:
        """The full logits [B, T, V]: what the plain path computes (for tests and for a loss that needs all of them)."""
        return torch.nn.functional.linear(self.hidden_BTC, self.weight_VC)
