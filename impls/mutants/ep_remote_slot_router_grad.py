"""mutant.ep-remote-slot-router-grad: under expert parallelism, the slots a rank routed to another rank's experts keep
a non-zero output on the rank's local path, hidden in the forward by a routing weight zeroed in value only.

Where it happens: transformers #48687, fixed by PR #48689 ("Keep the expert-parallel sentinel slots out of the router
gradient"). Under EP transformers' router relabels a slot of a remote expert to a sentinel and zeroes its weight; the
batched experts kernel still computes a (non-zero) output for it, and the zero weight hid that in the forward but not
in the backward: the weight's gradient, that output times the upstream gradient, reached the router's scores for
slots the rank never routed. The fix masks the routing weights themselves. Here the reference's local path sends a
remote slot to its last local expert with weight `masked_fill(remote, 0)`; the mutant zeroes the value only (its
gradient passes straight through). Log-probs, loss and the last sparse layer's expert gradients stay exact; every
router gradient and everything upstream of a router moves.
"""

import dataclasses
from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def value_only_zero(top_p_NK: torch.Tensor, remote_NK: torch.Tensor) -> torch.Tensor:
    return top_p_NK - (top_p_NK * remote_NK).detach()  # the bug: zero in the forward, the router's gradient in the backward


class EpRemoteSlotRouterGrad(ReferenceEngine):
    name = "mutant.ep-remote-slot-router-grad"
    bug = "ep-remote-slot-router-grad"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, expert_slot_weights=value_only_zero)
