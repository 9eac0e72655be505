"""mutant.clip-norm-before-reduce: the gradient norm clipping divides by is this rank's own, taken
without the reduction over the data-parallel group.

Where it happens: a trainer moved from DDP to FSDP/ZeRO keeps `sqrt(sum(g.pow(2).sum()))` over its
local gradients (for a DTensor, `to_local()`), which was the global norm while every rank held the
reduced gradient whole and is the norm of 1/dp of the model once gradients are sharded (torch's
`clip_grad_norm_` on DTensors and torchtitan all-reduce the squared sums; hand-written clipping,
as in many RL trainers, often does not). Each rank then clips its shard by another coefficient,
and rank 0 reports the norm of its own shard.
"""

import math
from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.optim.grad_clip import local_squares
from packcheck.impls.reference.step.pipeline import REFERENCE


def local_grad_norm(grads, mesh) -> float:
    return math.sqrt(local_squares(grads).item())  # the bug: no all-reduce of the squared sums over the dp group


class ClipNormBeforeReduce(ReferenceEngine):
    name = "mutant.clip-norm-before-reduce"
    bug = "clip-norm-before-reduce"
    pipeline = replace(REFERENCE, grad_norm=local_grad_norm)
