"""mutant.ep-expert-grad-scaled: expert gradients exactly ep times too large under expert parallelism.

Where it happens: pytorch #160285 and torchtitan PR #1551 (Megatron-LM PR #5956 alike). A trainer whose ranks each
backpropagate their loss scaled for an average over the data-parallel group (dp times the rank's share of the global
loss, which DDP's or FSDP's averaging reduction over dp turns into the global gradient) reduces the expert parameters
over the expert-data-parallel group only, averaging over its dp / ep ranks. But the all-to-all's backward already
summed every EP rank's token gradients into the expert's owner, so the experts' gradients come out dp / (dp / ep) = ep
times too large, while every dense gradient is right. Here: the reference's expert-dp sum, then that factor.
"""

import dataclasses
from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.expert_parallel import expert_parameters, reduce_expert_grads
from packcheck.impls.reference.step.pipeline import REFERENCE


def averaged_over_expert_dp(model, mesh) -> None:
    reduce_expert_grads(model, mesh)
    for p in expert_parameters(model):
        p.grad.mul_(mesh.dp / mesh.plan.expert_dp)  # the bug: a dp-scaled loss averaged over expert-dp's dp / ep ranks only


class EpExpertGradScaled(ReferenceEngine):
    name = "mutant.ep-expert-grad-scaled"
    bug = "ep-expert-grad-scaled"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_moe"}))
    pipeline = replace(REFERENCE, reduce_expert_grads=averaged_over_expert_dp)
