"""optimizer_step: one AdamW step with clipping that bites, weight decay and frozen parameters
gives the single-process parameters and gradient norm on every mesh (dp2 DDP, dp2 FSDP2, cp2,
dp2 x cp2 FSDP2), and the single-process step is the step the harness computes itself.

The contract's clipping is by the *global* norm (harness/contract/optimizer.py): over every
trainable parameter, after the data-parallel reduction, across every rank and shard, once per
step. Real trainers get it wrong where the gradient is split: a norm over the rank's own FSDP
shard, squares summed over WORLD (each context-parallel rank counting the same shard again),
clipping inside the accumulation loop (each micro-batch by its own norm), and frozen parameters
handed to the optimizer with zero gradients, which weight decay then shrinks (BUGS.md
frozen-tower-decay). Micro-batches and data-parallel ranks hold uneven token counts, so a
per-micro-batch or per-rank norm differs from the global one.

Against the baseline (dp1, one micro-batch) every arm must give the same gradients, pre-clip norm
and parameters after the step; the baseline itself must report a norm that is the L2 norm of its
own reported gradients, and parameters that are the harness's own float64 AdamW step from the
checkpoint, its reported gradients and its reported norm (harness/compare/adamw_step.py): that
catches a wrong step that is the same in every arm. Frozen parameters must equal the checkpoint
bit for bit, and every trainable tensor must have moved (a step that did not happen is a finding),
except one whose whole step, by the harness's AdamW, is within the result dtype's rounding (bfloat16).
Every other comparison reads rank 0's result; a replica that drifted (a rank that stepped with a gradient
of its own: its last micro-batch added after the data-parallel reduction, DeepSpeed PR #7985) shows only on the
other ranks. So in every distributed arm each rank's own `params_after` is digested by the harness in that rank's
process (harness/compare/param_digest.py), and every rank must hold rank 0's parameters bit for bit
(harness/compare/replicas.py: why all ranks, not ranks grouped by their cp position); an engine whose other ranks
return None is not compared there, and the verdict says so.
A text family's arms train every parameter; a frozen pair (dp1_frozen, the harness's checks again,
and dp2_shard_frozen against it) freezes its first decoder layer, so an engine that cannot freeze
text parameters is still judged on the clipping. A VLM's tower is frozen in every arm.

The step is chosen so clipping shows in the parameters: AdamW's first step is g / (|g| + eps), blind
to a gradient's scale where |g| >> eps, so eps is set near the clipped gradient's elements (where
the update is close to linear in the clip coefficient) instead of 1e-8: the clipped gradient has
norm MAX_GRAD_NORM, so its elements are ~MAX_GRAD_NORM / sqrt(parameters) ~ 1e-4. MAX_GRAD_NORM sits
20 times or more below the baseline's pre-clip norm on every family, as measured on the reference
(float64: llama 1.109, qwen3 1.115, qwen3_moe 1.040, qwen3_5 64.33, qwen2_5_vl 1.633), so the clip
coefficient is 0.048 or smaller everywhere; tests/test_optimizer_step.py keeps llama's at >= 10x.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

import torch
from packcheck.harness.compare import HARNESS, Arms, Comparison, Tolerance
from packcheck.harness.compare.adamw_step import as_checkpoint, stepped, steps_past_rounding
from packcheck.harness.compare.arms import compare_all_but_tensors, compare_grad_norm, null_of, tensor_rows
from packcheck.harness.compare.conditioning import error_weights
from packcheck.harness.compare.metrics import Float64Buffers, error_sums, sums_to_host
from packcheck.harness.compare.replicas import QUANTITY as REPLICAS
from packcheck.harness.compare.replicas import compare_replicas, differences
from packcheck.harness.contract import OptimizerSpec, ParallelPlan, Partition, StepResult, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.device import judging_device
from packcheck.harness.judging.diagnoses import Diagnosis, wrong_token_weights
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing
from safetensors.torch import load_file

SEQ_LEN = 48
BASELINE = "dp1"
FROZEN_BASELINE, FROZEN_SHARD = "dp1_frozen", "dp2_shard_frozen"
FROZEN_TEXT_LAYER = "model.layers.0."  # the frozen pair of a text family freezes its first decoder layer
CONDITIONED = ("cond_rel_l2", "cond_max_rel")  # params_after's metrics: weighted by the step's conditioning
MAX_GRAD_NORM = 0.05
OPTIMIZER = OptimizerSpec(lr=1e-2, eps=1e-4, weight_decay=0.1, max_grad_norm=MAX_GRAD_NORM)
UNEVEN = Partition.single_rank([(0, 7), (1, 2, 4), (3, 5, 6, 8)])
DP2_UNEVEN = Partition(per_rank=(((0, 7), (1, 2, 3)), ((5, 6, 8), (4,))))  # sample 4: a fully masked length-1 sample
MESHES = {
    "dp1_uneven": (ParallelPlan(), UNEVEN),
    "dp2_replicate": (ParallelPlan(dp=2, dp_style="replicate"), DP2_UNEVEN),
    "dp2_shard": (ParallelPlan(dp=2, dp_style="shard"), DP2_UNEVEN),
    "cp2_ulysses": (ParallelPlan(cp=2, cp_style="ulysses"), UNEVEN),
    "dp2_shard_x_cp2_ring": (ParallelPlan(dp=2, cp=2, cp_style="ring", dp_style="shard"), DP2_UNEVEN),
}


def frozen_arms(setting: Setting, samples: tuple) -> dict:
    """The frozen pair, for a family that trains every parameter by default (a VLM's tower is frozen in every
    arm already): the baseline and the FSDP2 arm with the first decoder layer frozen. Kept apart from the
    other arms so an engine that cannot freeze text parameters (verl) is still judged on the clipping."""
    if setting.model.frozen:
        return {}
    frozen = dataclasses.replace(setting, model=dataclasses.replace(setting.model, frozen=(FROZEN_TEXT_LAYER,)))
    plan, partition = MESHES["dp2_shard"]
    return {FROZEN_BASELINE: arm(frozen, FROZEN_BASELINE, samples, packed(SEQ_LEN), optimizer=OPTIMIZER),
            FROZEN_SHARD: arm(frozen, FROZEN_SHARD, samples, packed(SEQ_LEN), partition, parallel=plan, optimizer=OPTIMIZER)}


def build(setting: Setting) -> dict:
    samples = samples_for(setting, SKEWED_LENGTHS)
    arms = {BASELINE: arm(setting, BASELINE, samples, packed(SEQ_LEN), optimizer=OPTIMIZER)}
    for name, (plan, partition) in MESHES.items():
        arms[name] = arm(setting, name, samples, packed(SEQ_LEN), partition, parallel=plan, optimizer=OPTIMIZER)
    return arms | frozen_arms(setting, samples)


def baseline_of(arm_name: str) -> str:
    """The arm another is compared with: each frozen arm with the frozen baseline, the rest with the baseline."""
    return FROZEN_BASELINE if arm_name in (FROZEN_BASELINE, FROZEN_SHARD) else BASELINE


def checkpoint_params(j: Judgement) -> dict[str, torch.Tensor]:
    return load_file(str(Path(j.cases[BASELINE].model.checkpoint) / "model.safetensors"), device=str(judging_device(j)))


def example(names: list[str]) -> str:
    return f", e.g. {names[0]}" if names else ""


@dataclasses.dataclass(slots=True)
class Facts:
    """What the judge needs of one parameter, by arm: its few numbers and error_sums' reductions (left on the device)."""

    must_move: dict[str, bool] = dataclasses.field(default_factory=dict)  # the arm's own step by the harness moves it past rounding
    unchanged: dict[str, bool] = dataclasses.field(default_factory=dict)  # exactly as in the checkpoint (asked of those that must move, and frozen ones)
    squares: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # a baseline's gradient's sum of squares
    harness: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # a baseline's parameter against the harness's step
    grad: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # an arm's gradient against its baseline's
    params: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # an arm's parameter against its baseline's


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """Which comparisons the judge makes: the baselines checked against the harness, each other arm's baseline, the
    tensors each arm freezes."""

    baselines: tuple[str, ...] = ()
    against: dict[str, str] = dataclasses.field(default_factory=dict)
    frozen: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)


def tensor_facts(name: str, before: dict, results: Mapping[str, StepResult], plan: Plan, device: torch.device,
                 buffers: Float64Buffers) -> Facts:
    """Every comparison of parameter `name`, on `device`: each arm's gradient and parameter brought there once, each
    arm's step by the harness computed once (a baseline's serves its own check and the moved check). The same float64
    operations on the same values as each comparison made on its own (tests/test_optimizer_judge.py)."""
    facts = Facts()
    checkpoint = before.get(name)
    checkpoint = None if checkpoint is None else checkpoint.to(device)
    grads = {label: r.grads[name].to(device) for label, r in results.items() if name in r.grads}
    after = {label: r.params_after[name].to(device) for label, r in results.items()
             if r.params_after is not None and name in r.params_after}
    for label, result in results.items():
        dtype = next(iter(result.params_after.values())).dtype
        if name in plan.frozen.get(label, ()):
            facts.unchanged[label] = as_checkpoint(after[label], checkpoint, after[label].dtype)
        if label not in grads and (label not in plan.baselines or checkpoint is None):
            continue
        if label in grads:
            expected = stepped(checkpoint, grads[label], OPTIMIZER, coefficient(result))
            facts.must_move[label] = steps_past_rounding(expected, checkpoint, dtype)
            if facts.must_move[label]:
                facts.unchanged[label] = as_checkpoint(after[label], checkpoint, dtype)
        else:  # a frozen parameter: the harness's step leaves it as it was
            expected = checkpoint.double()
        if label in plan.baselines:
            if label in grads:
                facts.squares[label] = grads[label].double().pow(2).sum()
            weights = error_weights(expected, coefficient(result) * grads[label], OPTIMIZER) if label in grads else None
            facts.harness[label] = error_sums(after[label], expected, weights, buffers)
        del expected
    for label, base in plan.against.items():
        if base in grads:
            facts.grad[label] = error_sums(grads[label], grads[base], buffers=buffers)
        if base in after and results[label].params_after is not None:
            weights = error_weights(after[base], coefficient(results[base]) * grads[base], OPTIMIZER) if base in grads else None
            facts.params[label] = error_sums(after[label], after[base], weights, buffers)
    return facts


def coefficient(result: StepResult) -> float:
    """The clip coefficient of the step `result` reports: by its own pre-clip norm."""
    return OPTIMIZER.clip_coefficient(result.grad_norm) if result.grad_norm is not None else 1.0


def all_facts(before: dict, results: Mapping[str, StepResult], plan: Plan, device: torch.device) -> dict[str, Facts]:
    """tensor_facts of every parameter the checkpoint or a result names, one after the other (a SIGINT stops the run
    between two: harness/cli/run_cmd.py). On the host for a parameter the GPU has no room for (the engine's next arm
    may hold it): slower, the same comparisons."""
    buffers, facts = Float64Buffers(), {}
    names = set(before).union(*(r.grads for r in results.values()), *((r.params_after or {}) for r in results.values()))
    for name in sorted(names):
        try:
            facts[name] = tensor_facts(name, before, results, plan, device, buffers)
        except torch.OutOfMemoryError:
            facts[name] = tensor_facts(name, before, results, plan, torch.device("cpu"), Float64Buffers())
    return facts


def frozen_row(arm_name: str, frozen: list[str], facts: dict[str, Facts]) -> Comparison:
    moved = [n for n in frozen if not facts[n].unchanged[arm_name]]
    return Comparison(arms=Arms(arm_name, HARNESS), quantity="frozen_params", item="", metric="changed_tensors",
                      observed=float(len(moved)), threshold=0.0,
                      where=f"{len(moved)} of {len(frozen)} frozen tensors differ from the checkpoint" + example(moved))


def moved_row(arm_name: str, result: StepResult, facts: dict[str, Facts]) -> Comparison:
    """Trainable tensors left exactly as in the checkpoint, among those the harness's own AdamW step moves by more
    than the result dtype's spacing: in bfloat16 an lr-sized step on values near 1 (qwen3_5's A_log, measured on an
    H200) leaves a tensor unchanged in a correct engine too; in float64 every stepped tensor moves."""
    dtype = next(iter(result.params_after.values())).dtype
    must_move = [n for n in result.grads if facts[n].must_move[arm_name]]
    still = [n for n in must_move if facts[n].unchanged[arm_name]]
    rounded_away = len(result.grads) - len(must_move)
    return Comparison(arms=Arms(arm_name, HARNESS), quantity="trainable_moved", item="", metric="unchanged_tensors",
                      observed=float(len(still)), threshold=0.0,
                      where=f"{len(still)} of {len(must_move)} trainable tensors are exactly as in the checkpoint" + example(still)
                      + (f" ({rounded_away} more whose whole step is within {dtype}'s rounding)" if rounded_away else ""))


def compare_moved(arm_name: str, result: StepResult, before: dict) -> Comparison:
    """moved_row of one arm on its own, where its tensors are."""
    device = next(iter(result.grads.values())).device
    return moved_row(arm_name, result, all_facts(before, {arm_name: result}, Plan(), device))


def harness_rows(name: str, base: StepResult, before: dict, facts: dict[str, Facts], tol: Tolerance) -> list[Comparison]:
    """A baseline against the harness: its norm is its gradients' norm, its step one clipped AdamW step."""
    squares = sums_to_host([facts[n].squares[name] for n in base.grads])
    norm = math.sqrt(sum(squares))  # global_norm's float64 sum, in the gradients' order
    rows = [compare_grad_norm(Arms(name, HARNESS), base.grad_norm, norm, tol, "L2 of reported grads")]
    names = sorted(before)
    return rows + tensor_rows(Arms(name, HARNESS), "params_after", CONDITIONED, {n: before[n].shape for n in names},
                              [facts[n].harness[name] for n in names], tol.by("params_after"))


def pair_rows(j: Judgement, name: str, against: str, facts: dict[str, Facts]) -> list[Comparison]:
    """An arm against its baseline: compare_results' rows (log-probs to parameters), then the pre-clip norm."""
    result, base, tol = j.results[name], j.results[against], j.tolerance
    arms = Arms(name, against)
    rows = compare_all_but_tensors(arms, result, base, tol, j.locate(name))
    names = sorted(base.grads)
    rows += tensor_rows(arms, "grad", ("rel_l2", "max_rel"), {n: base.grads[n].shape for n in names}, [facts[n].grad[name] for n in names],
                        tol.by("grad"), null_of(arms, tol))
    if result.params_after is not None and base.params_after is not None:
        names = sorted(base.params_after)
        rows += tensor_rows(arms, "params_after", CONDITIONED, {n: base.params_after[n].shape for n in names},
                            [facts[n].params[name] for n in names], tol.by("params_after"))
    return rows + [compare_grad_norm(arms, result.grad_norm, base.grad_norm, tol)]


def judge(j: Judgement) -> list:
    """Every comparison of every parameter in one pass over the parameters (all_facts), then the rows in the
    scenario's order: each baseline against the harness; per arm, its frozen tensors, its moved ones, its ranks against
    rank 0 (a distributed arm whose other ranks returned their parameters), and against its baseline."""
    before = checkpoint_params(j)
    frozen = {name: sorted(n for n in before if j.cases[name].model.is_frozen(n)) for name in j.results}
    plan = Plan(baselines=tuple(n for n in (BASELINE, FROZEN_BASELINE) if n in j.results),
                against={n: baseline_of(n) for n in j.results if n != baseline_of(n) and baseline_of(n) in j.results},
                frozen={n: frozenset(names) for n, names in frozen.items()})
    facts = all_facts(before, j.results, plan, judging_device(j))
    rows = []
    for name in plan.baselines:
        rows += harness_rows(name, j.results[name], before, facts, j.tolerance)
    for name, result in j.results.items():
        if frozen[name]:
            rows.append(frozen_row(name, frozen[name], facts))
        rows.append(moved_row(name, result, facts))
        if (replicas := compare_replicas(name, j.cases[name].parallel, result.param_digests)) is not None:
            rows.append(replicas)
        if name in plan.against:
            rows += pair_rows(j, name, plan.against[name], facts)
    return rows


def diagnose(j: Judgement, failed: list) -> str:
    arms = lambda rows: sorted({c.arms.arm.name for c in rows})  # noqa: E731
    if failing(failed, "frozen_params"):
        return (f"frozen parameters moved on {', '.join(arms(failing(failed, 'frozen_params')))}: they are in the optimizer "
                "(weight decay shrinks them even with zero gradients, BUGS.md frozen-tower-decay)")
    if failing(failed, "trainable_moved"):
        return "a trainable parameter did not move: the optimizer step did not happen, or skipped parameters it should update"
    if failing(failed, "logprobs") or failing(failed, "num_loss_tokens"):
        return ("log-probs or counts change with the mesh: the forward or the token count is wrong, not the optimizer step "
                "(see dp_cp_reduction, cp_vs_nocp)")
    # the per-token weights (dloss_dlogprobs) are read before any clipping: wrong ones (mean of means, a constant scale)
    # explain the gradients that differ, and clipping per micro-batch cannot change them
    if weights := wrong_token_weights(j, failed, BASELINE):
        return Diagnosis(weights, wrong_token_weights.__name__)
    grads = failing(failed, "grad")
    drift = failing(failed, REPLICAS)
    # gradients that differ on one process are the partition's doing (below), whatever the replicas then do
    if drift and all(j.cases[c.arms.arm.name].parallel.world_size > 1 for c in grads):
        return replica_diagnosis(j, drift, failed)
    if grads:
        return (f"the reported gradients differ on {', '.join(arms(grads))} with the micro-batch partition: each micro-batch's gradient "
                "is clipped (or scaled) before accumulation instead of the accumulated gradient once per step")
    norms = [c for c in failing(failed, "grad_norm") if c.arms.against_arm]
    if norms:
        on = arms(norms)
        sharded = [a for a in on if j.cases[a].parallel.dp_style == "shard"]
        if sharded == on:
            return (f"the gradient norm differs only where gradients are sharded ({', '.join(on)}): it is taken over the rank's local "
                    "FSDP shard, not all-reduced over the data-parallel group (or over WORLD, counting each shard once per cp rank)")
        return (f"the gradient norm differs on {', '.join(on)}: taken before the data-parallel reduction, or summed over the wrong "
                "group (a context-parallel rank's identical shard counted again)")
    if failing(failed, "grad_norm"):
        return ("the reported norm is not the L2 norm of the reported gradients: taken over the wrong parameters (frozen ones "
                "counted, some missed), after clipping, or not the L2 norm")
    step = [c for c in failing(failed, "params_after") if c.arms.against == HARNESS]
    if step:
        return ("the single-process step is not one AdamW step on the gradient clipped by the reported norm: the clip coefficient, "
                "weight decay, learning rate, eps or bias correction is wrong (the same in every arm, so only the harness's own step "
                "sees it)")
    return ("gradients and norms agree but the parameters after the step differ by mesh: each rank clips by another coefficient, "
            "or the optimizer state is sharded or stepped inconsistently")


def replica_diagnosis(j: Judgement, drift: list, failed: list) -> str:
    """Ranks of a distributed arm that hold other parameters than its rank 0: drifted replicas, or a report that is not
    the whole parameters."""
    found = {c.arms.arm.name: [d for d in differences(j.results[c.arms.arm.name].param_digests) if d.any] for c in drift}
    ranks = "; ".join(f"{arm}: rank {', '.join(f'{d.rank} ({j.cases[arm].parallel.position(d.rank)})' for d in ds)}"
                      for arm, ds in found.items())
    if not any(d.drifted for ds in found.values() for d in ds):
        return (f"replicas cannot be compared on {ranks}: the rank returned parameters that are not the whole tensors rank 0 "
                "reports (a shard, a cast, some missing) or none while the others did; return every checkpoint tensor whole "
                "(DTensor.full_tensor()) on every rank, or None from every rank but rank 0")
    own = sorted({c.arms.arm.name for c in failed if c.quantity != REPLICAS and c.arms.arm.name in found})
    return (f"replicas drift: after the step these ranks hold other parameters than rank 0, bit for bit ({ranks}): each "
            "stepped with a gradient of its own, so part of the data-parallel reduction did not reach every rank (a "
            "micro-batch's gradient added after the reduction, DeepSpeed PR #7985; a reduction over a subgroup, or one "
            "that some ranks skip); rank 0's result alone does not show it"
            + (f" (rank 0's own result differs from the single process too, on {', '.join(own)})" if own else ""))


OPTIMIZER_STEP = Scenario(
    name="optimizer_step",
    invariant=("one clipped AdamW step with weight decay and frozen parameters gives the single-process gradients, pre-clip norm "
               "and parameters on dp2 (DDP, FSDP2), cp2 and dp2 x cp2 (FSDP2); the single-process step is the harness's own; "
               "frozen parameters (a frozen pair of arms, or a VLM's tower in every arm) bit-identical, trainable ones moved; "
               "every rank of a distributed arm holds rank 0's parameters after the step, bit for bit (replicas agree, "
               "judged from the harness's digest of each rank's own params_after)"),
    catches=("clip-per-microbatch", "frozen-weight-decay", "clip-norm-before-reduce", "replica-last-microbatch-after-reduce"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES) | {FROZEN_BASELINE, FROZEN_SHARD},
    disk_arms=8,
)
