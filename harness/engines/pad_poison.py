"""The engine side of pad poisoning (Case.pad_poison, harness/contract/pad_poison.py): the values an engine writes into
its own pad positions, and where.

An engine declares `Capabilities(pad_poison=True)` and, inside `run`:

    poison = pad_poison(case)                       # None unless the case asks: nothing changes, nothing slows
    for each forward of the step, with sample_BT / token_BT saying which (sample, token) each position holds (-1: pad):
        x_BTC = poison.hidden(embed(input_ids_BT), sample_BT)            # the embeddings' output: finite garbage at pads
        router_logits_NE = poison.router_logits(router_logits_NE, sample_N)   # MoE, every sparse layer: the same
        logits_BTV = poison.logits(logits_BTV, sample_BT, token_BT)     # NaN / +Inf at pads, the canary's row
        ... the log-softmax and the loss, from these logits

Each is `torch.where(overwritten, value, x)`, whose backward sends exactly 0 to x where it wrote. An engine whose
log-prob backward is written by hand (a chunked or fused kernel) applies `logits` to each chunk of rows and zeroes the
gradient of the rows `overwritten` names. Leading dimensions may be anything ([B, T], [N], a chunk of N) as long as
`sample` and `token` have them.

Why finite garbage upstream of the logits: pad positions run through every layer, and a NaN there reaches every weight
gradient of a correct engine (0 x NaN = NaN in the attention's P V and in dW = X^T dY); a finite value times the exact
zeros a correct engine sends there is exactly 0. Right before the log-softmax the pad rows feed only the loss, and the
where's backward zeroes them before the LM head, so NaN and +Inf are exact there.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import CANARY_LOGIT, Case, PadPoison

GARBAGE = 1e4  # the finite poison's scale: ~1e4 times an activation's, and finite after squaring in float32 and bfloat16


class PadPoisoner:
    def __init__(self, request: PadPoison):
        self.canary_sample, self.canary_token = request.canary

    def logits(self, logits_XV: torch.Tensor, sample_X: torch.Tensor, token_X: torch.Tensor) -> torch.Tensor:
        """Every pad position's row NaN at even vocabulary entries and +Inf at odd ones; the canary's row CANARY_LOGIT at
        entry 0 and zeros elsewhere (harness/contract/pad_poison.py)."""
        vocab_V = torch.arange(logits_XV.shape[-1], device=logits_XV.device)
        poison_V = torch.where(vocab_V % 2 == 1, torch.inf, torch.nan).to(logits_XV.dtype)
        canary_V = torch.where(vocab_V == 0, CANARY_LOGIT, 0.0).to(logits_XV.dtype)
        poisoned = torch.where((sample_X < 0).to(logits_XV.device)[..., None], poison_V, logits_XV)
        return torch.where(self.canary_row(sample_X, token_X).to(logits_XV.device)[..., None], canary_V, poisoned)

    def overwritten(self, sample_X: torch.Tensor, token_X: torch.Tensor) -> torch.Tensor:
        """The rows `logits` replaces (pads and the canary's): a hand-written backward sends them no gradient."""
        return (sample_X < 0) | self.canary_row(sample_X, token_X)

    def canary_row(self, sample_X: torch.Tensor, token_X: torch.Tensor) -> torch.Tensor:
        """The position that holds the canary's preceding token, whose logits predict the canary."""
        return (sample_X == self.canary_sample) & (token_X == self.canary_token - 1)

    def hidden(self, x_XC: torch.Tensor, sample_X: torch.Tensor) -> torch.Tensor:
        """The embeddings' output (or any hidden state) with finite garbage at every pad position."""
        return torch.where((sample_X < 0).to(x_XC.device)[..., None], garbage(x_XC.shape[-1], x_XC), x_XC)

    def router_logits(self, logits_XE: torch.Tensor, sample_X: torch.Tensor) -> torch.Tensor:
        """A router's logits with finite garbage at every pad position (every pad then picks the same experts)."""
        return self.hidden(logits_XE, sample_X)


def garbage(width: int, like: torch.Tensor) -> torch.Tensor:
    """GARBAGE * cos(0..width-1): finite, far from any activation, and not the same in every channel."""
    return (GARBAGE * torch.cos(torch.arange(width, dtype=torch.float64))).to(device=like.device, dtype=like.dtype)


def pad_poison(case: Case) -> PadPoisoner | None:
    """The poisoner of `case`'s request, or None when it asks for none."""
    return None if case.pad_poison is None else PadPoisoner(case.pad_poison)
