"""What a CausalLM returns instead of logits when its loss takes log-probs chunk by chunk: the final
hidden states and the lm_head weight (impls/reference/loss/chunked_logprobs.py multiplies them one chunk
of tokens at a time, so the full [B, T, V] logits never exist), and, where a case poisons its pads, the
overwrite of the rows those logits would have had (model/pad_poison.py), applied chunk by chunk too.

A NamedTuple, so DistributedDataParallel and pytree walk into it like a tuple of two tensors (the overwrite is
attached after the forward, outside them).

Shapes: B batch, T sequence, C hidden_size, V vocab_size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from packcheck.impls.reference.model.poisoned_rows import PoisonedRows


class LmHeadInputs(NamedTuple):
    hidden_BTC: torch.Tensor  # after the final norm
    weight_VC: torch.Tensor  # lm_head.weight (the embedding's when tied)
    overwrite: PoisonedRows | None = None  # rows whose logits a pad-poisoned case replaces

    def logits(self) -> torch.Tensor:
        """The full logits [B, T, V]: what the plain path computes (for tests and for a loss that needs all of them)."""
        logits_BTV = torch.nn.functional.linear(self.hidden_BTC, self.weight_VC)
        if self.overwrite is None:
            return logits_BTV
        return self.overwrite.logits(logits_BTV.reshape(-1, logits_BTV.shape[-1])).view(logits_BTV.shape)
