"""mutant.moe-aux-grad-accumulation-scaled: under M-step gradient accumulation the aux loss's gradient is M times too large.

Where it happened: NeMo Automodel PR #3359. The LM loss of each micro-batch was divided by the number of
accumulation steps, the MoE load-balancing loss was not, so the router's aux gradient grew with the number of
micro-batches. Here each forward's aux share is multiplied by the micro-step count M: exact with one micro-batch,
M times the aux gradient with M; the loss, the log-probs, the reported aux loss and the router counts stay exact.
"""

import dataclasses
from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.counts import Counts
from packcheck.impls.reference.step.pipeline import REFERENCE


def aux_scaled_by_micro_steps(loss: torch.Tensor, aux: torch.Tensor, coef: float, counts: Counts) -> torch.Tensor:
    return loss + coef * aux * counts.micro_steps  # the bug: the aux share is not divided like the loss's


class MoeAuxGradAccumulationScaled(ReferenceEngine):
    name = "mutant.moe-aux-grad-accumulation-scaled"
    bug = "moe-aux-grad-accumulation-scaled"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, with_aux_loss=aux_scaled_by_micro_steps)
