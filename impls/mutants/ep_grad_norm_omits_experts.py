"""mutant.ep-grad-norm-omits-experts: the global gradient norm misses the experts other EP ranks hold, so clipping is
weaker than the contract's.

Where it happens: Megatron-LM PR #5916 (EP x TP: the gradient norm's reduction left some experts' squares out). Each EP
rank holds only its experts' gradients; the norm must sum their squares over the expert-parallel group. Here the EP
reduction of the expert squares is missing: rank 0 counts only its own experts, reports a smaller norm and clips by a
larger coefficient. Gradients are exact; the pre-clip norm and the parameters after the step are not.
"""

import dataclasses
import math
from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.optim.grad_clip import local_squares
from packcheck.impls.reference.step.pipeline import REFERENCE


def norm_of_local_experts(grads, mesh) -> float:
    return math.sqrt(local_squares(grads).item())  # the bug: expert squares not summed over the EP group (DDP: no dp sum)


class EpGradNormOmitsExperts(ReferenceEngine):
    name = "mutant.ep-grad-norm-omits-experts"
    bug = "ep-grad-norm-omits-experts"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, grad_norm=norm_of_local_experts)
