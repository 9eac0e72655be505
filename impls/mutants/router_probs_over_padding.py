"""mutant.router-probs-over-padding: the MoE load-balancing loss sums its router probabilities over padding too.

Where it happened: TransformerEngine PR #2819 fixed the class, a router-side statistic taken over padding (with THD
and `return_max_logit=True`, the `max_logit` QK-clip reads was computed over the padding tokens); for the MoE
aux loss itself, Megatron-LM issue #1984 / PR #2142 (padding counted in the routing loss) and Megatron-Bridge PR #5470
(packed padding in the router statistics). Here the routing counts f stay over the real tokens (the reported router
counts are right) and only P_e, the summed router probabilities, also takes every pad position: the aux loss and every
gradient upstream of a router then depend on what the pads hold, which Case.pad_poison changes.
"""

import dataclasses
from dataclasses import replace

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def every_position_N(predictions: Predictions) -> torch.Tensor:
    return torch.ones(predictions.sample_BT.numel(), dtype=torch.bool)  # the bug: padding's router probabilities summed too


class RouterProbsOverPadding(ReferenceEngine):
    name = "mutant.router-probs-over-padding"
    bug = "router-probs-over-padding"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, aux_prob_positions=every_position_N)
