"""Per-token log-probs and the token-mean loss normalised by the *global* loss-token count.

Log-probs are target-aligned: lp_BT[b, t] = log p(x[b, t] | x[b, <t]) from the logits at t-1;
lp_BT[:, 0] = 0 (nothing precedes the first token of a row). A micro-batch contributes
-sum(lp * target_mask) * token_weight, where every token weighs 1 / (global loss tokens), so the
sum over micro-batches (and ranks) is the global mean whatever the partition.
"""

from __future__ import annotations

import torch


def target_logprobs(logits_BTV: torch.Tensor, input_ids_BT: torch.Tensor) -> torch.Tensor:
    logp_BTV = torch.log_softmax(logits_BTV[:, :-1], dim=-1)
    lp_BT = logp_BTV.gather(-1, input_ids_BT[:, 1:, None]).squeeze(-1)
    return torch.cat([lp_BT.new_zeros(lp_BT.shape[0], 1), lp_BT], dim=1)


def token_weight(micro_tokens: int, global_tokens: int, micro_steps: int) -> float:
    """The weight of one loss token: 1 / global count, the same in every micro-batch."""
    return 1.0 / global_tokens
