"""A forward's positions as a pad-poisoned case's logits overwrite sees them (Case.pad_poison): which rows of the
logits the harness's poisoner replaces, and with what, for a log-prob computed a chunk of rows at a time
(loss/chunked_logprobs.py) as for the whole logits (model/pad_poison.py).

Shapes: N = B*T positions of one forward, V vocab_size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.engines.pad_poison import PadPoisoner


@dataclass(frozen=True, slots=True)
class PoisonedRows:
    poisoner: PadPoisoner
    sample_N: torch.Tensor  # which sample each position holds (-1: padding)
    token_N: torch.Tensor  # which token of it

    def logits(self, z_NV: torch.Tensor, part: slice = slice(None)) -> torch.Tensor:
        """The logits of rows `part` with the pads' and the canary's overwritten."""
        return self.poisoner.logits(z_NV, self.sample_N[part], self.token_N[part])

    def overwritten(self, part: slice = slice(None)) -> torch.Tensor:
        """Which rows of `part` the overwrite replaced: their logits get no gradient."""
        return self.poisoner.overwritten(self.sample_N[part], self.token_N[part])
