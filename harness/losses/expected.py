"""What an engine's loss and per-token weights must be: the one definition every check and the
report use.

For a case and the engine's own log-probs, `expected_loss` gives the loss and d loss / d logprob of
every token as the case's loss defines them: for SFT, the token mean -sum(w logp) with w = 1/N on
the loss mask (d loss / d logprob = -1/N there, 0 elsewhere); for a policy loss, the aggregation
weights times each token's clipped-surrogate (+ KL) loss and its derivative (the entropy bonus
held fixed: it is a function of the whole distribution, which an engine does not report), at the samples' own
advantages or, where the case has an estimator, at the harness's (advantages.py); for the
gradient oracle's weighted log-prob sum, the sample's own weights (the reported log-prob of token 0
is 0.0, so a weight on token 0 adds nothing to the loss implied by the reported log-probs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from packcheck.harness.contract import Case, LossKind
from packcheck.harness.losses.advantages import policy_samples
from packcheck.harness.losses.aggregation import token_weights
from packcheck.harness.losses.policy import TokenLoss, token_loss


@dataclass(frozen=True, slots=True)
class Expected:
    loss: float  # without a policy loss's entropy bonus
    dloss_dlogprobs: list[torch.Tensor]  # per sample, float64 [len(sample)], 0 off the loss mask
    token_losses: list[TokenLoss] | None  # a policy loss's per-token terms (ratio, branch); None for SFT
    # per sample, how fast each token's weight moves with its own log-prob (|W| x TokenLoss.slope_T); None where the
    # weights do not depend on the log-probs (SFT, a weighted log-prob sum)
    weight_slopes: list[torch.Tensor] | None = None

    def describe(self, case: Case) -> str:
        """The expectation in words, for a report's legend."""
        if case.loss.is_weighted:
            return "the case's own per-token weights (logprob_weights)"
        if self.token_losses is None:
            return "-1/N on the loss mask, 0 elsewhere"
        return f"the {case.loss.aggregation.value} weight times each token's clipped-surrogate derivative at its log-prob"


def expected_loss(case: Case, logprobs: Sequence[torch.Tensor]) -> Expected:
    """The definition of `case.loss` evaluated at `logprobs`."""
    if case.loss.is_weighted:
        given = [torch.tensor(s.logprob_weights, dtype=torch.float64) for s in case.samples]
        return Expected(math.fsum(float((w * lp.double()).sum()) for w, lp in zip(given, logprobs)), given, None)
    weights = token_weights(case)
    if case.loss.kind is LossKind.SFT_TOKEN_MEAN:
        loss = -math.fsum(float((w * lp.double()).sum()) for w, lp in zip(weights, logprobs))
        return Expected(loss, [-w for w in weights], None)
    losses = [token_loss(lp, sample, case.loss) for lp, sample in zip(logprobs, policy_samples(case))]

    def weighted(values: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [torch.where(w != 0, w * v, 0.0) for w, v in zip(weights, values)]  # masked tokens may hold anything

    value = weighted([tl.value_T for tl in losses])
    return Expected(math.fsum(float(v.sum()) for v in value), weighted([tl.dvalue_dlogp_T for tl in losses]), losses,
                    weighted([tl.slope_T for tl in losses]))
