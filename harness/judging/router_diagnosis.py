"""The likely cause when a MoE arm's router reports disagree (harness/compare/router.py), shared by
the scenarios that compare them; None when they agree or the forward itself already differs."""

from __future__ import annotations

from packcheck.harness.compare import Comparison

# The router's weight in Hugging Face naming (Qwen-MoE, OLMoE, DeepSeek: `mlp.gate`; Mixtral: `block_sparse_moe.gate`).
ROUTER_SUFFIXES = (".mlp.gate.weight", ".block_sparse_moe.gate.weight")
# Parameters after the last router, which the load-balancing loss cannot reach: their gradients are the LM loss's alone.
PAST_THE_ROUTERS = ("lm_head.weight", "model.norm.weight")


def aux_gradient_diagnosis(failed: list[Comparison]) -> str | None:
    """The load-balancing loss's gradient is missing or scaled: only gradients upstream of a router differ (a router's
    among them), while log-probs, loss, count, the aux loss's value and those past the last router agree."""
    grads = {c.item for c in failed if c.quantity == "grad"}
    if {c.quantity for c in failed} != {"grad"} or not any(parameter.endswith(ROUTER_SUFFIXES) for parameter in grads):
        return None
    if grads & set(PAST_THE_ROUTERS):
        return None
    router = next(parameter for parameter in sorted(grads) if parameter.endswith(ROUTER_SUFFIXES))
    return ("only gradients the MoE load-balancing loss reaches differ (the routers and what feeds them, e.g. "
            f"{router}; lm_head and the final norm agree) while the log-probs, the loss and the aux loss's value agree: the "
            "aux loss's gradient is not d(coef x aux)/d theta: dropped (a value logged but not backpropagated) or scaled "
            "(not divided by the accumulation steps like the LM loss)")


def router_diagnosis(failed: list[Comparison]) -> str | None:
    quantities = {c.quantity for c in failed}
    if "logprobs" in quantities:
        return None
    if "router_tokens_per_expert" in quantities:
        where = next(c.where for c in failed if c.quantity == "router_tokens_per_expert")
        return (f"the router's global tokens per expert differ ({where}) while log-probs agree: padding routed or counted, "
                "or the counts of one rank, shard or micro-batch reported instead of the global batch's")
    if "aux_loss" in quantities:
        return ("the MoE load-balancing loss depends on the partition while the routing counts agree: it is normalised per "
                "micro-batch or rank (its own routing fractions and token count) instead of over the global batch")
    return aux_gradient_diagnosis(failed)
