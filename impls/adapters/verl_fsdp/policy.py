"""The PPO/GRPO loss through verl's own `ppo_loss` (vanilla clipped surrogate, `agg_loss` modes).

verl's RL data is a rollout: a left-padded prompt, a right-padded response, and per response
token `response_mask`, `old_log_probs`, `advantages`, `ref_log_prob`; verl's own
`left_right_2_no_padding` turns it into the engine's nested input (its `loss_mask` is the
response mask). A harness sample maps onto it as prompt = token 0, response = tokens 1..n-1,
per-token fields shifted by one (the harness aligns them to input_ids, verl to response tokens), so
the mask may have holes (multi-turn) exactly as verl's response masks do.

The contract's parameters map onto verl's `ActorConfig`:
- clip_low / clip_high -> clip_ratio_low / clip_ratio_high;
- dual_clip c -> clip_ratio_c; no dual clip -> clip_ratio_c = 1e30 (verl always applies one; at that
  bound min(-A c, pg) is pg exactly for every finite loss);
- kl_coef -> use_kl_loss, kl_loss_type "low_var_kl" (k3; verl clamps it to [-10, 10], never reached here);
- entropy_coef -> entropy_coeff, with verl computing the entropy (`calculate_entropy`);
- aggregation -> loss_agg_mode. verl divides the seq-mean modes by the `global_batch_size` it is given
  and seq-mean-token-sum-norm by global_batch_size x loss_scale_factor (PR #5417). The contract's G
  (samples with a target) and C are passed as global_batch_size = G and loss_scale_factor = C / G,
  which is what the contract defines; `TrainerNormalisers` in variants.py passes what verl's trainer does.
"""

from __future__ import annotations

import functools

import torch

from packcheck.harness.contract import Aggregation, Case

NO_DUAL_CLIP = 1e30


def rollout_tensors(case: Case, slots: list[int | None], token_mask) -> dict[str, torch.Tensor]:
    """verl's left-right padded rollout tensors for these rows (None: an inert row, prompt only)."""
    samples = [case.samples[s] if s is not None else None for s in slots]
    width = max([len(s.input_ids) - 1 for s in samples if s is not None] + [1])  # response width

    def response(s, values, fill=0.0):
        row = list(values[1:]) if s is not None else []
        return row + [fill] * (width - len(row))

    prompts = torch.tensor([[s.input_ids[0] if s is not None else 0] for s in samples], dtype=torch.long)
    responses = torch.tensor([response(s, s.input_ids if s else (), 0) for s in samples], dtype=torch.long)
    lengths = torch.tensor([len(s.input_ids) - 1 if s is not None else 0 for s in samples])
    response_attention = (torch.arange(width)[None, :] < lengths[:, None]).long()
    attention_mask = torch.cat([torch.ones(len(samples), 1, dtype=torch.long), response_attention], dim=1)
    dtype = torch.float32
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(1) - 1).clamp(min=0),
        "response_mask": torch.tensor([response(s, token_mask(s) if s else (), 0) for s in samples], dtype=torch.long),
        "advantages": torch.tensor([response(s, s.token_advantages if s else ()) for s in samples], dtype=dtype),
        "old_log_probs": torch.tensor([response(s, s.old_logprobs if s else ()) for s in samples], dtype=dtype),
    }
    if case.loss.kl_coef:
        tensors["ref_log_prob"] = torch.tensor([response(s, s.ref_logprobs if s else ()) for s in samples], dtype=dtype)
    return tensors


def samples_with_targets(case: Case) -> int:
    return sum(1 for s in case.samples if s.num_targets > 0)


def actor_config(case: Case, micro_batch_size: int, loss_scale_factor: float | None):
    from verl.workers.config import ActorConfig

    spec = case.loss
    return ActorConfig(
        strategy="fsdp2",
        rollout_n=1,
        ppo_mini_batch_size=len(case.samples),
        ppo_micro_batch_size_per_gpu=micro_batch_size,
        clip_ratio=spec.clip_low,
        clip_ratio_low=spec.clip_low,
        clip_ratio_high=spec.clip_high,
        clip_ratio_c=spec.dual_clip if spec.dual_clip is not None else NO_DUAL_CLIP,
        loss_agg_mode=spec.aggregation.value,
        loss_scale_factor=loss_scale_factor,
        entropy_coeff=spec.entropy_coef,
        calculate_entropy=spec.entropy_coef != 0.0,
        use_kl_loss=spec.kl_coef != 0.0,
        kl_loss_coef=spec.kl_coef,
        kl_loss_type="low_var_kl",
        use_torch_compile=False,
    )


def contract_normalisers(case: Case) -> tuple[int, float | None]:
    """(global_batch_size, loss_scale_factor) that make verl's aggregation the contract's."""
    g = max(samples_with_targets(case), 1)
    c = case.loss.norm_constant
    return g, (c / g if case.loss.aggregation is Aggregation.SEQ_MEAN_TOKEN_SUM_NORM else None)


def ppo_loss_function(config):
    from verl.workers.utils.losses import ppo_loss

    return functools.partial(ppo_loss, config=config)
