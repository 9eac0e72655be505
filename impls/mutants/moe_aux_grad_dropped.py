"""mutant.moe-aux-grad-dropped: the MoE load-balancing loss is computed and reported, but its gradient never reaches the router.

Where it happened: NeMo Automodel #1408 (fixed by PR #1412). The aux-loss autoscaler returned the loss with the
aux gradient attached, and the caller discarded that return value: the aux loss was logged, so it looked right,
while the backward saw only the LM loss. Here the forward's aux share is added detached: the loss, the log-probs, the
reported aux loss and the router counts stay exact, and every gradient the aux loss reaches (the routers and what
feeds them, never lm_head) lacks d(coef x aux)/d theta. Every arm of the engine lacks it alike, so only a comparison
with the float64 reference sees it.
"""

import dataclasses
from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def aux_without_gradient(loss: torch.Tensor, aux: torch.Tensor, coef: float, counts: Counts) -> torch.Tensor:
    return loss + coef * aux.detach()  # the bug: the value is there, its gradient is not


class MoeAuxGradDropped(ReferenceEngine):
    name = "mutant.moe-aux-grad-dropped"
    bug = "moe-aux-grad-dropped"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, with_aux_loss=aux_without_gradient)
