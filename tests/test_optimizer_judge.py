"""optimizer_step's judge in one pass over the parameters (harness/scenarios/optimizer_step.py, all_facts) gives the
rows, bit for bit, of its definition: each comparison made on its own from the generic comparisons (compare_results,
compare_params_after) and the harness's own step (adamw_step, global_norm), as the judge did before it was made fast
enough for 8B. The same float64 operations on the same values, in the same order; the step made partly in place
(adamw_step.stepped) equals its expression."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from packcheck.harness.compare import HARNESS, Arms, Comparison, compare_results, tolerance_for
from packcheck.harness.compare.adamw_step import adamw_step, global_norm, stepped, steps_past_rounding
from packcheck.harness.compare.arms import compare_grad_norm, compare_params_after
from packcheck.harness.contract import StepResult
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import Judgement
from packcheck.harness.scenarios.optimizer_step import (
    BASELINE, FROZEN_BASELINE, FROZEN_SHARD, OPTIMIZER, OPTIMIZER_STEP, baseline_of, build, checkpoint_params,
    example,
)


def step_as_written(p: torch.Tensor, g: torch.Tensor, coefficient: float) -> torch.Tensor:
    """The step as adamw_step wrote it before stepped() made it in place."""
    p, (beta1, beta2), spec = p.double(), OPTIMIZER.betas, OPTIMIZER
    g = g.to(p.device).double() * coefficient
    exp_avg, exp_avg_sq = (1 - beta1) * g, (1 - beta2) * g * g
    denom = exp_avg_sq.sqrt() / math.sqrt(1 - beta2) + spec.eps
    return p * (1 - spec.lr * spec.weight_decay) - spec.lr / (1 - beta1) * exp_avg / denom


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_the_step_in_place_equals_its_expression_bit_for_bit(dtype):
    generator = torch.Generator().manual_seed(3)
    p = torch.randn(300, 17, generator=generator, dtype=torch.float64).to(dtype)
    scale = 10.0 ** torch.randint(-12, 2, (300, 17), generator=generator)  # |g| far below, near and far above eps
    g = (torch.randn(300, 17, generator=generator, dtype=torch.float64) * scale).to(dtype)
    g[0, :5] = 0
    for coefficient in (1.0, 0.0473, 1e-30):
        assert torch.equal(stepped(p, g, OPTIMIZER, coefficient), step_as_written(p, g, coefficient)), coefficient


def judge_as_defined(j: Judgement) -> list:
    """optimizer_step's judge before the one pass: every comparison on its own."""
    before, tol, rows = checkpoint_params(j), j.tolerance, []

    def unchanged(value, name, dtype):
        return torch.equal(value.to(dtype), before[name].to(device=value.device, dtype=dtype))

    for name in (BASELINE, FROZEN_BASELINE):
        if name in j.results:
            base = j.results[name]
            rows.append(compare_grad_norm(Arms(name, HARNESS), base.grad_norm, global_norm(base.grads), tol, "L2 of reported grads"))
            expected = dataclasses.replace(base, params_after=adamw_step(before, base.grads, OPTIMIZER, base.grad_norm))
            rows += compare_params_after(Arms(name, HARNESS), base, expected, tol, OPTIMIZER)
    for name, result in j.results.items():
        frozen = sorted(n for n in before if j.cases[name].model.is_frozen(n))
        if frozen:
            moved = [n for n in frozen if not unchanged(result.params_after[n], n, result.params_after[n].dtype)]
            rows.append(_frozen(name, frozen, moved))
        dtype = next(iter(result.params_after.values())).dtype
        expected = adamw_step(before, result.grads, OPTIMIZER, result.grad_norm)
        must_move = [n for n in result.grads if steps_past_rounding(expected[n], before[n], dtype)]
        still = [n for n in must_move if unchanged(result.params_after[n], n, dtype)]
        rows.append(_moved(name, result, must_move, still, dtype))
        against = baseline_of(name)
        if name != against and against in j.results:
            base = j.results[against]
            rows += compare_results(Arms(name, against), result, base, tol, j.locate(name), optimizer=OPTIMIZER)
            rows.append(compare_grad_norm(Arms(name, against), result.grad_norm, base.grad_norm, tol))
    return rows


def _frozen(name, frozen, moved):
    return Comparison(arms=Arms(name, HARNESS), quantity="frozen_params", item="", metric="changed_tensors", observed=float(len(moved)),
                      threshold=0.0, where=f"{len(moved)} of {len(frozen)} frozen tensors differ from the checkpoint" + example(moved))


def _moved(name, result, must_move, still, dtype):
    rounded_away = len(result.grads) - len(must_move)
    return Comparison(arms=Arms(name, HARNESS), quantity="trainable_moved", item="", metric="unchanged_tensors", observed=float(len(still)),
                      threshold=0.0, where=f"{len(still)} of {len(must_move)} trainable tensors are exactly as in the checkpoint"
                      + example(still) + (f" ({rounded_away} more whose whole step is within {dtype}'s rounding)" if rounded_away else ""))


def fabricated(j: Judgement, before: dict, dtype: torch.dtype) -> dict[str, StepResult]:
    """Results a judge sees, in `dtype`: a clean baseline and frozen baseline (the harness's own step), an arm whose
    gradients differ a little (its norm and step with them), and a frozen shard with a frozen tensor decayed and a
    trainable one never stepped."""
    generator = torch.Generator().manual_seed(5)

    def result(arm: str, noise: float = 0.0) -> StepResult:
        case = j.cases[arm]
        grads = {n: torch.randn(p.shape, generator=generator, dtype=torch.float64) * 1e-3 for n, p in before.items()
                 if not case.model.is_frozen(n)}
        grads = {n: (g * (1 + noise * torch.randn(g.shape, generator=generator, dtype=torch.float64))).to(dtype) for n, g in grads.items()}
        norm = global_norm(grads)
        after = {n: t.to(dtype) for n, t in adamw_step(before, grads, OPTIMIZER, norm).items()}
        return StepResult(logprobs=[torch.zeros(len(s.input_ids), dtype=dtype) for s in case.samples], loss=1.0,
                          num_loss_tokens=case.num_loss_tokens, grads=grads, grad_norm=norm, params_after=after)

    results = {BASELINE: result(BASELINE), "dp1_uneven": result("dp1_uneven", 1e-3),
               FROZEN_BASELINE: result(FROZEN_BASELINE), FROZEN_SHARD: result(FROZEN_SHARD, 1e-6)}
    shard = results[FROZEN_SHARD]
    frozen = next(n for n in before if j.cases[FROZEN_SHARD].model.is_frozen(n))
    trainable = next(iter(shard.grads))
    after = dict(shard.params_after) | {frozen: (before[frozen].double() * (1 - OPTIMIZER.lr * OPTIMIZER.weight_decay)).to(dtype),
                                        trainable: before[trainable].to(dtype)}
    results[FROZEN_SHARD] = dataclasses.replace(shard, params_after=after)
    return results


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16], ids=str)
def test_the_one_pass_judge_gives_the_rows_of_each_comparison_on_its_own_bit_for_bit(dtype):
    setting = setting_for("llama", "float64", "cpu")
    cases = build(setting)
    j = Judgement(setting=setting, cases=cases, results={}, tolerance=tolerance_for("float64" if dtype == torch.float64 else "bfloat16"))
    j = dataclasses.replace(j, results=fabricated(j, checkpoint_params(j), dtype))
    rows, defined = OPTIMIZER_STEP.judge(j), judge_as_defined(j)
    assert len(rows) == len(defined) > 200
    differing = [(i, a, b) for i, (a, b) in enumerate(zip(rows, defined)) if a != b]
    assert not differing, f"{len(differing)} rows differ, e.g. {differing[0]}"
    failed = {(c.arms.arm.name, c.quantity) for c in rows if not c.passed}
    assert {(FROZEN_SHARD, "frozen_params"), (FROZEN_SHARD, "trainable_moved")} <= failed, "the comparison exercises failing rows"
