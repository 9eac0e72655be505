"""ep_vs_noep: on a MoE family, spreading the experts over expert-parallel ranks (ep2 x dp2, ep4 x dp4, and dp4 x ep2
where two ranks hold each expert) gives the single-process log-probs, loss, count, router reports and every gradient,
and one clipped AdamW step on ep2 x dp2 gives the single-process pre-clip norm and parameters.

The baseline is the single process, not dp2 without EP: dp_cp_reduction already proves the data-parallel arms equal it,
so every EP arm judged against it answers for its expert layout alone, and a bug shared by every data-parallel arm is
still seen. Every rank runs two micro-batches of uneven token counts; one micro-batch of the dp4 arms (and of ep2's
rank 1) holds a single token, which routes to 2 of the 4 experts, so in that forward the other experts' ranks receive
no row from it (the all-to-all's zero split sizes). The optimizer step is optimizer_step's (clipping that bites).

Under EP the all-to-all's backward already sums every EP rank's token gradients into the expert's owner, so expert
gradients are summed over expert-dp only: averaged over expert-dp for a loss that DDP averages over dp, they come out ep
times too large (torchtitan PR #1551). A rank's local path must add nothing for slots routed to another rank's experts,
in value and in gradient: a zero routing weight that hides a non-zero expert output in the forward still hands the
router its gradient (transformers #48687). The global gradient norm must count every expert once: a norm that skips the
EP reduction of the expert squares clips too weakly (Megatron-LM PR #5916), which shows only after the step.
"""

from __future__ import annotations

import torch

from packcheck.harness.compare import Arms
from packcheck.harness.compare.arms import compare_grad_norm
from packcheck.harness.compare.replicas import QUANTITY as REPLICAS
from packcheck.harness.compare.replicas import compare_replicas
from packcheck.harness.contract import ParallelPlan, Partition, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.engines import Capabilities
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import every_arm_against, failing
from packcheck.harness.scenarios.optimizer_step import OPTIMIZER

SEQ_LEN = 48
SINGLE = "single"
STEPPED = "ep2_dp2"  # the arm that takes the optimizer step (with the baseline)
EXPERTS = ".mlp.experts."  # the expert tensors' names (mlp.experts.gate_up_proj, down_proj); the routers are mlp.gate
# sample 4 (SKEWED_LENGTHS[4]) is one token: its micro-batch routes to 2 of the 4 experts
EP2 = Partition(per_rank=(((0, 2, 8), (7, 1)), ((3, 5, 6), (4,))))
DP4 = Partition(per_rank=(((0,), (1, 2)), ((7,), (4,)), ((3,), (8,)), ((5,), (6,))))
MESHES = {
    STEPPED: (ParallelPlan(dp=2, ep=2), EP2),
    "ep4_dp4": (ParallelPlan(dp=4, ep=4), DP4),
    "dp4_ep2": (ParallelPlan(dp=4, ep=2), DP4),
}


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    if not setting.model.config.get("num_experts"):
        return f"{setting.family} has no experts: expert parallelism spreads a MoE family's experts over ranks (qwen3_moe)"
    return None


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {SINGLE: arm(setting, SINGLE, samples, packed(SEQ_LEN), optimizer=OPTIMIZER)}
    for name, (plan, partition) in MESHES.items():
        step = {"optimizer": OPTIMIZER} if name == STEPPED else {}
        arms[name] = arm(setting, name, samples, packed(SEQ_LEN), partition, parallel=plan, **step)
    return arms


def judge(j: Judgement) -> list:
    rows = every_arm_against(j, SINGLE)
    if j.has(STEPPED, SINGLE):
        stepped, base = j.results[STEPPED], j.results[SINGLE]
        rows.append(compare_grad_norm(Arms(STEPPED, SINGLE), stepped.grad_norm, base.grad_norm, j.tolerance))
        if (replicas := compare_replicas(STEPPED, j.cases[STEPPED].parallel, stepped.param_digests)) is not None:
            rows.append(replicas)
    return rows


def expert_grad_ratios(j: Judgement, name: str) -> list[float]:
    """||expert gradient of `name`|| / ||the baseline's||, per expert tensor the baseline moves."""
    arm, base = j.results[name].grads, j.results[SINGLE].grads
    return [float(torch.linalg.vector_norm(arm[t].double().cpu()) / torch.linalg.vector_norm(base[t].double().cpu()))
            for t in base if EXPERTS in t and t in arm and base[t].abs().max() > 0]


def diagnose(j: Judgement, failed: list) -> str:
    layout = lambda name: f"{name} ({j.cases[name].parallel.ep} EP ranks, {j.cases[name].parallel.expert_dp} per expert)"  # noqa: E731
    # only the stepped arm has a step to compare: the shared rules would read the others' agreement as the baseline's fault
    if {c.quantity for c in failed} <= {"grad_norm", "params_after", REPLICAS} and all(c.arms.arm.name == STEPPED for c in failed):
        return (f"gradients agree but the pre-clip norm or the parameters after the step differ on {layout(STEPPED)}: the global "
                "gradient norm misses experts (their squares not summed over the EP group, Megatron-LM PR #5916), so clipping is weaker"
                + (", and each EP rank clips by the norm of its own experts, so the replicas drift" if failing(failed, REPLICAS) else ""))
    if shared := shared_diagnosis(j, failed, baseline=SINGLE):
        return shared
    grads = sorted({c.arms.arm.name for c in failing(failed, "grad")})
    scaled = [n for n in grads if (ratios := expert_grad_ratios(j, n)) and all(abs(r / j.cases[n].parallel.ep - 1) < 1e-6 for r in ratios)]
    if scaled:
        return (f"expert gradients are exactly ep times the single process's on {', '.join(map(layout, scaled))}: the all-to-all's backward "
                "already sums every EP rank's tokens into the expert's owner, and the expert-data-parallel reduction then averages "
                "over expert-dp only a gradient taken for a loss scaled by dp (torchtitan PR #1551): sum over expert-dp instead")
    if failing(failed, "logprobs") or failing(failed, "loss"):
        return ("log-probs or the loss change with the expert layout: the dispatch or combine all-to-all sends rows to the wrong rank or "
                "expert, or weights a slot by another's routing probability")
    routers = [c for c in failing(failed, "grad") if ".mlp.gate." in c.item]
    if routers:
        return (f"the forward is exact but router gradients differ on {', '.join(map(layout, grads))} ({routers[0].item}): slots routed to "
                "another rank's experts keep a non-zero output on the local path, hidden by a zero routing weight in the forward but not "
                "in the backward, so the router gets gradient for slots it never routed (transformers #48687): mask the weight itself")
    if grads:
        return f"gradients differ on {', '.join(map(layout, grads))} with the forward exact: the expert gradient reduction is wrong"
    return "the expert-parallel arms differ from the single process: see the failing rows"


EP_VS_NOEP = Scenario(
    name="ep_vs_noep",
    invariant=("experts spread over ep2 x dp2, ep4 x dp4 and dp4 x ep2 (uneven tokens, a one-token micro-batch) give the single-process "
               "log-probs, loss, count, router reports and every gradient; one clipped AdamW step on ep2 x dp2 gives its norm and "
               "parameters, every rank holding the same"),
    catches=("ep-remote-slot-router-grad", "ep-expert-grad-scaled", "ep-grad-norm-omits-experts"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES),
    applies=applies,
    disk_arms=4,
)
