"""gradient_oracle: the gradients an engine reports are the ones its own per-token weights imply.

The scenarios between arms of one engine trust that the reported gradients follow from the reported
forward and `dloss_dlogprobs`; a backward that is wrong the same way in every arm (a fused
log-prob/cross-entropy kernel sending wrong gradients into the logits while the forward, the loss
and the weights are exact) passes all of them. Here each arm of the engine gets an oracle arm
(oracle_arms.py): the same Case with loss sum(w logp), w = the engine's reported weights, run by the
float64 reference, whose gradient is exactly the vector-Jacobian product of its per-token log-probs
with w. Compared with the engine's arm: every gradient tensor (the backward), the log-probs (the
forward the gradient is taken of), the weights the oracle could place (a weight with no row
position in this layout), and a MoE model's router reports (the aux-loss term both gradients carry).

Which tokens carry which weight is mask_alignment's question, not this one's: an engine that trains a
document's token 0 across a packed boundary passes here, because its oracle arm puts the same weight
on the same position of the same packed row (tests/test_gradient_oracle.py shows it on
mutant.boundary-label). The arms are single-process, packed and unpacked, two uneven micro-batches.
"""

from __future__ import annotations

from packcheck.harness.compare import ArmId, Arms, Role, compare_logprobs, compare_tensors
from packcheck.harness.compare.arms import compare_dloss_dlogprobs
from packcheck.harness.compare.router import compare_router
from packcheck.harness.contract import UNPACKED, Partition, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.engines import Capabilities
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.oracle_memory import oracle_memory_reason
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.oracle_arms import oracle_arms
from packcheck.harness.judging.truth import Bounds
from packcheck.harness.scenarios.base import Before, Scenario, Stage, from_setting
from packcheck.harness.scenarios.building import failing

SEQ_LEN = 48
PARTITION = Partition.single_rank([(0, 1, 2, 3), (4, 5, 6, 7, 8, 9)])  # uneven micro-batches: 47 and 65 tokens in a text family


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MIXED_DOCUMENTS)
    return {
        "packed": arm(setting, "packed", samples, packed(SEQ_LEN), PARTITION),
        "unpacked": arm(setting, "unpacked", samples, UNPACKED, PARTITION),
    }


def oracle(setting: Setting, before: Before) -> dict:
    return oracle_arms(before.cases, before.results)


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    if "dloss_dlogprobs" not in capabilities.reports:
        return "the engine does not report dloss_dlogprobs, which gradient_oracle judges"
    return oracle_memory_reason(setting)


def judge(j: Judgement) -> list:
    rows = []
    tol = j.bound
    for name, result in j.results.items():
        if name not in j.oracle:
            continue
        truth = j.oracle[name]
        arms = Arms(name, ArmId(name).oracle)
        rows.append(compare_logprobs(arms, result, truth, tol, j.locate(name)))
        rows += compare_dloss_dlogprobs(arms, result, truth, tol, j.locate(name))
        rows += compare_router(arms, result, truth, tol)
        rows += compare_tensors(arms, "grad", result.grads, truth.grads, tol)
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    # a wrong token set or count (docs/diagnoses.md) explains a gradient too; a weight the oracle could not place
    # (a document's token 0 where nothing precedes it) is outside the loss mask, so the token-set rule names it
    if shared := shared_diagnosis(j, failed):
        return shared
    if failing(failed, "logprobs"):
        return ("the engine's forward differs from the float64 reference's on the same checkpoint and rows, so its gradient "
                "is of another function: a model, attention or position bug, or a precision below the case's dtype in the "
                "forward (logits, RMSNorm or RoPE angles in float32, as transformers computes them), not the backward (see "
                "packed_vs_unpacked and golden_regression)")
    if failing(failed, "aux_loss") or failing(failed, "router_tokens_per_expert"):
        return ("the MoE load-balancing term differs from the contract's (its aux loss or routing counts): the gradient above "
                "each router carries it (see microbatch_invariance for a per-micro-batch normalisation)")
    worst = max(failing(failed, "grad"), key=lambda c: c.margin)
    return ("the reported gradients do not follow from the engine's own forward and per-token weights: the backward into the "
            "logits disagrees with the dloss_dlogprobs it reports (a fused or custom log-prob/cross-entropy kernel's backward, "
            f"or a gradient scaled or hooked after the loss); worst tensor {worst.item} ({worst.metric} {worst.observed:.3g})")


GRADIENT_ORACLE = Scenario(
    name="gradient_oracle",
    invariant="every reported gradient equals the float64 reference's gradient of sum(w logp), w = the engine's reported dloss_dlogprobs",
    catches=("logit-grad-tile-softmax",),
    stages=(from_setting(build), Stage(build=oracle, role=Role.ORACLE)),
    judge=judge,
    diagnose=diagnose,
    applies=applies,
    optional_arms=frozenset({"packed", "unpacked"}),
    bounds=Bounds.TRUTH,  # against float64 truth: the golden's noise floor on these samples, packed, in this partition (the table where a family has no golden)
    absolute=True,
    disk_arms=4,
)
