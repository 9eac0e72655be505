"""The clipped PPO surrogate as a prime-rl custom loss: what a prime-rl user writes to train with it.

prime-rl's own rl losses (`default_loss_fn`: DPPO's probability-difference mask plus a squared
log-ratio KL; `ipo_loss_fn`) are other objectives than the contract's clipped surrogate, and its
documented way to train another one is `CustomLossConfig(import_path=..., kwargs=...)`: a function
from one sample's `LossInputs` to the sum of its per-token losses. prime-rl's `compute_loss` still
does everything around it, the part that packing, data and context parallelism can break: splitting
the packed row into samples, selecting the loss tokens, and dividing by the global rl token count.
The per-token formula is the contract's (harness/contract/loss.py; k3 KL against ref_logprobs).
"""

from __future__ import annotations

import torch


def ppo_clip_loss(inputs, clip_low: float, clip_high: float, dual_clip: float | None = None, kl_coef: float = 0.0):
    from prime_rl.trainer.rl.loss import LossOutputs

    advantage = inputs.advantages
    ratio = torch.exp(inputs.trainer_logprobs - inputs.inference_logprobs)
    token = torch.maximum(-advantage * ratio, -advantage * ratio.clamp(1.0 - clip_low, 1.0 + clip_high))
    if dual_clip is not None:
        token = torch.where(advantage < 0, torch.minimum(token, -advantage * dual_clip), token)
    if kl_coef:
        log_ref_ratio = inputs.ref_logprobs - inputs.trainer_logprobs
        token = token + kl_coef * (torch.exp(log_ref_ratio) - log_ref_ratio - 1.0)
    if inputs.loss_weights is not None:
        token = token * inputs.loss_weights
    return LossOutputs(loss=token[inputs.loss_mask].sum(), metrics={})
