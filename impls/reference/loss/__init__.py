"""The reference's loss over rows: what each forward contributes to the global loss.

The counts a loss weight may use (counts), the SFT token mean (token_mean), log p(label) a chunk
of tokens at a time (chunked_logprobs, reference.fast), the per-token PPO/GRPO loss, its inputs and
its aggregation weights (policy_loss, policy_inputs, aggregation), the gradient oracle's weighted
log-prob sum (weighted_loss) and the MoE load-balancing loss (router_aux).
"""
