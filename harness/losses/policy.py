"""The per-token PPO/GRPO loss and its derivative by the token's log-prob, in closed form.

For one sample, with A the advantages, old / ref the behaviour / reference log-probs and
r = exp(logp - old) (definitions: harness/contract/loss.py):

    pg  = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)),  with dual_clip c and A < 0: min(pg, -A c)
    kl  = exp(ref - logp) - (ref - logp) - 1

    d pg / d logp = -A r where the unclipped term is the active one, 0 where a clip is
    d kl / d logp = 1 - exp(ref - logp)

and how fast that derivative moves with the log-prob, term by term (each is c exp(+-logp), so a log-prob moved by
d moves it by at most slope * (exp(|d|) - 1): what harness/compare/rounding_bound.py propagates rounding through):

    slope = |A r| where the unclipped term is active + kl_coef exp(ref - logp)

The entropy bonus is not here: it is a function of the whole predicted distribution, which an
engine does not report, so the harness checks it through invariances instead (docs/rl-losses.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from packcheck.harness.contract import LossSpec, Sample


class Branch(IntEnum):
    """Which term of the clipped surrogate a token's loss comes from."""

    UNCLIPPED = 0
    CLIPPED = 1  # r outside [1 - clip_low, 1 + clip_high] on the side where the clip is the max
    DUAL_CLIPPED = 2  # A < 0 and the loss capped at -A c


@dataclass(frozen=True, slots=True)
class TokenLoss:
    value_T: torch.Tensor  # pg + kl_coef * kl per token (float64)
    dvalue_dlogp_T: torch.Tensor  # its derivative by the token's log-prob
    ratio_T: torch.Tensor  # r = exp(logp - old)
    branch_T: torch.Tensor  # Branch per token
    slope_T: torch.Tensor  # |d dvalue_dlogp / d logp|, term by term (the module docstring)


def token_loss(logp_T: torch.Tensor, sample: Sample, spec: LossSpec) -> TokenLoss:
    """The loss of every token of `sample` at log-probs `logp_T` (masked tokens included; weights zero them)."""
    lp = logp_T.double()
    advantage = torch.tensor(sample.token_advantages, dtype=torch.float64)
    ratio = torch.exp(lp - torch.tensor(sample.old_logprobs, dtype=torch.float64))
    unclipped = -advantage * ratio
    clipped = -advantage * ratio.clamp(1.0 - spec.clip_low, 1.0 + spec.clip_high)
    value = torch.maximum(unclipped, clipped)
    derivative = torch.where(unclipped >= clipped, -advantage * ratio, torch.zeros_like(ratio))
    branch = torch.where(unclipped >= clipped, Branch.UNCLIPPED, Branch.CLIPPED)
    if spec.dual_clip is not None:
        cap = -advantage * spec.dual_clip
        capped = (advantage < 0) & (value > cap)
        value = torch.where(capped, cap, value)
        derivative = torch.where(capped, torch.zeros_like(derivative), derivative)
        branch = torch.where(capped, Branch.DUAL_CLIPPED, branch)
    slope = derivative.abs()  # d(-A r)/d logp = -A r on the unclipped branch, 0 where a clip is active
    if spec.kl_coef:
        log_ref_ratio = torch.tensor(sample.ref_logprobs, dtype=torch.float64) - lp
        value = value + spec.kl_coef * (torch.exp(log_ref_ratio) - log_ref_ratio - 1.0)
        derivative = derivative + spec.kl_coef * (1.0 - torch.exp(log_ref_ratio))
        slope = slope + spec.kl_coef * torch.exp(log_ref_ratio)
    return TokenLoss(value, derivative, ratio, branch, slope)
