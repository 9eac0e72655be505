"""A MoE trainer step's router reports, read from what the HF model returned in each training forward.

transformers' MoE causal LMs (output_router_logits on) return `aux_loss` (the micro-batch's own
load-balancing loss, which the model adds to its loss x router_aux_loss_coef) and every sparse
layer's `router_logits` [B*T, E]. The experts each token went to are the top k of the router's
softmax in float32, as `Qwen3MoeTopKRouter` chooses them; real tokens are those of the
attention_mask (padded batches) or all of them (flattened rows carry no padding).

Shapes: B rows, T tokens, E experts, K experts per token, L sparse layers.
"""

from __future__ import annotations

import torch


def router_tokens_per_expert(router_logits: tuple[torch.Tensor, ...], attention_mask_BT: torch.Tensor | None,
                             top_k: int) -> torch.Tensor:
    """Top-k assignments of the forward's real tokens to each expert, per sparse layer: [L, E] int64."""
    counts = []
    for logits_NE in router_logits:
        real_N = torch.ones(logits_NE.shape[0], dtype=torch.bool) if attention_mask_BT is None else attention_mask_BT.reshape(-1).bool()
        experts_NK = torch.softmax(logits_NE.detach(), dim=-1, dtype=torch.float32).topk(top_k, dim=-1).indices
        counts.append(torch.bincount(experts_NK[real_N.to(experts_NK.device)].flatten().cpu(), minlength=logits_NE.shape[-1]))
    return torch.stack(counts)
