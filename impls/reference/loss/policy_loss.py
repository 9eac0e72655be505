"""The reference's per-token PPO/GRPO loss on rows: clipped surrogate, k3 KL penalty, entropy bonus.

Mirrors verl's compute_policy_loss_vanilla (dual clip included), kl_penalty 'low_var_kl' (k3,
without its [-10, 10] clamp) and entropy_from_logits, written over [B, T] rows. The definitions
and their aggregation are in harness/contract/loss.py; this file is the autograd side, the
harness (harness/losses) computes the same numbers in closed form.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import LossSpec
from packcheck.impls.reference.loss.policy_inputs import PolicyInputs
from packcheck.impls.reference.loss.entropy import prediction_entropy


def clipped_surrogate(lp_BT: torch.Tensor, inputs: PolicyInputs, spec: LossSpec) -> torch.Tensor:
    advantages_BT = inputs.advantages_BT
    ratio_BT = torch.exp(lp_BT - inputs.old_logprobs_BT)
    unclipped_BT = -advantages_BT * ratio_BT
    clipped_BT = -advantages_BT * ratio_BT.clamp(1.0 - spec.clip_low, 1.0 + spec.clip_high)
    loss_BT = torch.maximum(unclipped_BT, clipped_BT)  # the pessimistic bound
    if spec.dual_clip is not None:
        loss_BT = torch.where(advantages_BT < 0, torch.minimum(loss_BT, -advantages_BT * spec.dual_clip), loss_BT)
    return loss_BT


def kl_k3(lp_BT: torch.Tensor, ref_BT: torch.Tensor) -> torch.Tensor:
    """exp(ref - lp) - (ref - lp) - 1: unbiased for KL(pi || pi_ref) under samples of pi, never negative."""
    log_ratio_BT = ref_BT - lp_BT
    return torch.exp(log_ratio_BT) - log_ratio_BT - 1.0


def token_loss(lp_BT: torch.Tensor, logits_BTV: torch.Tensor, inputs: PolicyInputs, spec: LossSpec) -> torch.Tensor:
    """l[b, t] = pg + kl_coef * kl - entropy_coef * H, at every position (the weights mask it)."""
    lp_BT = lp_BT.to(torch.promote_types(lp_BT.dtype, torch.float32))  # the ratio needs more than bf16
    inputs = inputs.to(lp_BT)
    loss_BT = clipped_surrogate(lp_BT, inputs, spec)
    if spec.kl_coef:
        loss_BT = loss_BT + spec.kl_coef * kl_k3(lp_BT, inputs.ref_logprobs_BT)
    if spec.entropy_coef:
        loss_BT = loss_BT - spec.entropy_coef * prediction_entropy(logits_BTV)
    return loss_BT
