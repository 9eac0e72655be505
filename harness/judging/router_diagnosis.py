"""The likely cause when a MoE arm's router reports disagree (harness/compare/router.py), shared by
the scenarios that compare them; None when they agree or the forward itself already differs."""

from __future__ import annotations

from packcheck.harness.compare import Comparison


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
    return None
