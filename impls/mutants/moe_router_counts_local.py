"""mutant.moe-router-counts-local: the MoE load-balancing loss normalised per micro-batch.

Where it happens: Megatron-LM and transformers compute the auxiliary loss inside each forward, from
that micro-batch's own routing fractions f and mean router probabilities P; gradient accumulation
then combines per-micro-batch aux losses, which is not the aux loss of the global batch
(E * sum f P is a product of two batch means, not a mean). Here each micro-batch's aux loss uses
its own counts and its own token count, weighted by its token share n/N, so the combination is as
fair as it can be and the only bug is the locality: exact when every micro-batch routes in the
same proportions, wrong for any real partition. The LM loss, the log-probs and the router counts
stay exact; the aux loss and the gradients it reaches (every parameter upstream of a router) move.
"""

import dataclasses
from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.router_aux import RouterCounts
from packcheck.impls.reference.step.pipeline import REFERENCE


def micro_batch_counts(micro: RouterCounts, global_: RouterCounts) -> RouterCounts:
    return micro  # the bug: the micro-batch's own f and P instead of the global batch's


class MoeRouterCountsLocal(ReferenceEngine):
    name = "mutant.moe-router-counts-local"
    bug = "moe-router-counts-local"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, router_balance_counts=micro_batch_counts)
