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
from pathlib import Path

import torch
from packcheck.harness.compare import HARNESS, Arms, Comparison, Tolerance, compare_results
from packcheck.harness.compare.adamw_step import adamw_step, global_norm
from packcheck.harness.compare.arms import compare_params_after
from packcheck.harness.compare.bound import RULE
from packcheck.harness.compare.metrics import rel
from packcheck.harness.contract import OptimizerSpec, ParallelPlan, Partition, StepResult, packed
from packcheck.harness.data.samples import SKEWED_LENGTHS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing
from safetensors.torch import load_file

SEQ_LEN = 48
BASELINE = "dp1"
FROZEN_BASELINE, FROZEN_SHARD = "dp1_frozen", "dp2_shard_frozen"
FROZEN_TEXT_LAYER = "model.layers.0."  # the frozen pair of a text family freezes its first decoder layer
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
    return load_file(str(Path(j.cases[BASELINE].model.checkpoint) / "model.safetensors"), device=str(j.device))


def compare_grad_norm(arms: Arms, observed: float, expected: float, tol: Tolerance, item: str = "") -> Comparison:
    """The pre-clip norm, a scalar judged as relatively as a loss: the scenario's own rule at the loss's threshold (no
    calibration measured grad_norm's noise, so it is not a calibrated comparison)."""
    return Comparison(arms=arms, quantity="grad_norm", item=item, metric="rel", observed=rel(observed, expected),
                      threshold=tol.loss, bound=RULE, where=f"{observed:.12g} vs {expected:.12g}")


def example(names: list[str]) -> str:
    return f", e.g. {names[0]}" if names else ""


def compare_frozen(arm_name: str, result: StepResult, before: dict, frozen: list[str]) -> Comparison:
    moved = [n for n in frozen if not as_checkpoint(result.params_after, before, n, result.params_after[n].dtype)]
    return Comparison(arms=Arms(arm_name, HARNESS), quantity="frozen_params", item="", metric="changed_tensors",
                      observed=float(len(moved)), threshold=0.0,
                      where=f"{len(moved)} of {len(frozen)} frozen tensors differ from the checkpoint" + example(moved))


def as_checkpoint(params: dict, before: dict, name: str, dtype: torch.dtype) -> bool:
    """Whether `name` is exactly as in the checkpoint (on the result's device: at 8B a result may be kept on the host)."""
    value = params[name]
    return torch.equal(value.to(dtype), before[name].to(device=value.device, dtype=dtype))


def steps_past_rounding(expected: torch.Tensor, before: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether the harness's step changes some element by more than `dtype`'s spacing there (eps x |value| is at least
    one spacing). A smaller step can round away in a correct engine: AdamW applies its weight decay and its update as
    two roundings, each below half a spacing, where the exact sum of the two is above it."""
    value = before.double()
    return bool(((expected.double() - value).abs() > torch.finfo(dtype).eps * value.abs()).any())


def compare_moved(arm_name: str, result: StepResult, before: dict) -> Comparison:
    """Trainable tensors left exactly as in the checkpoint, among those the harness's own AdamW step moves by more
    than the result dtype's spacing: in bfloat16 an lr-sized step on values near 1 (qwen3_5's A_log, measured on an
    H200) leaves a tensor unchanged in a correct engine too; in float64 every stepped tensor moves."""
    dtype = next(iter(result.params_after.values())).dtype
    expected = adamw_step(before, result.grads, OPTIMIZER, result.grad_norm)
    must_move = [n for n in result.grads if steps_past_rounding(expected[n], before[n], dtype)]
    still = [n for n in must_move if as_checkpoint(result.params_after, before, n, dtype)]
    rounded_away = len(result.grads) - len(must_move)
    return Comparison(arms=Arms(arm_name, HARNESS), quantity="trainable_moved", item="", metric="unchanged_tensors",
                      observed=float(len(still)), threshold=0.0,
                      where=f"{len(still)} of {len(must_move)} trainable tensors are exactly as in the checkpoint" + example(still)
                      + (f" ({rounded_away} more whose whole step is within {dtype}'s rounding)" if rounded_away else ""))


def check_against_harness(j: Judgement, name: str, before: dict) -> list[Comparison]:
    """A baseline against the harness: its norm is its gradients' norm, its step one clipped AdamW step."""
    base = j.results[name]
    rows = [compare_grad_norm(Arms(name, HARNESS), base.grad_norm, global_norm(base.grads), j.tolerance, "L2 of reported grads")]
    expected = StepResult(logprobs=base.logprobs, loss=base.loss, num_loss_tokens=base.num_loss_tokens, grads=base.grads,
                          grad_norm=base.grad_norm, params_after=adamw_step(before, base.grads, OPTIMIZER, base.grad_norm))
    return rows + compare_params_after(Arms(name, HARNESS), base, expected, j.tolerance, OPTIMIZER)


def judge(j: Judgement) -> list:
    tol = j.tolerance
    before = checkpoint_params(j)
    rows = []
    for name in (BASELINE, FROZEN_BASELINE):
        if name in j.results:
            rows += check_against_harness(j, name, before)
    for name, result in j.results.items():
        frozen = sorted(n for n in before if j.cases[name].model.is_frozen(n))
        if frozen:
            rows.append(compare_frozen(name, result, before, frozen))
        rows.append(compare_moved(name, result, before))
        against = baseline_of(name)
        if name != against and against in j.results:
            base = j.results[against]
            rows += compare_results(Arms(name, against), result, base, tol, j.locate(name), optimizer=OPTIMIZER)
            rows.append(compare_grad_norm(Arms(name, against), result.grad_norm, base.grad_norm, tol))
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
    grads = failing(failed, "grad")
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


OPTIMIZER_STEP = Scenario(
    name="optimizer_step",
    invariant=("one clipped AdamW step with weight decay and frozen parameters gives the single-process gradients, pre-clip norm "
               "and parameters on dp2 (DDP, FSDP2), cp2 and dp2 x cp2 (FSDP2); the single-process step is the harness's own; "
               "frozen parameters (a frozen pair of arms, or a VLM's tower in every arm) bit-identical, trainable ones moved"),
    catches=("clip-per-microbatch", "frozen-weight-decay", "clip-norm-before-reduce"),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
    optional_arms=frozenset(MESHES) | {FROZEN_BASELINE, FROZEN_SHARD},
)
