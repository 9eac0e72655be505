"""The reference's pipeline parallelism, part by part: the stage split (units composed stage after stage are the
unsplit model, logits and gradients, on three families), the 3-stage gloo arm in float64 against the single-process
step (every gradient and the step's parameters), the refusal of more stages than units,
and the mesh check that flags a pipeline arm whose stages never exchanged anything.

pp_vs_nopp's verdicts (the reference passes, mutant.pp-middle-stage-boundaries flagged) are in
tests/test_mutants_are_caught.py and the conformance suite; here the parts they rest on.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from packcheck.harness.collectives.mesh_use import unused_pipeline
from packcheck.harness.compare import Arms, compare_results, tolerance_for
from packcheck.harness.contract import Layout, LayoutKind, ParallelPlan
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios.pp_vs_nopp import SINGLE, build
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model.loading import load_model
from packcheck.impls.reference.parallel.pipeline_stages import build_stage, layer_inputs, stage_bounds

CLEAN = 1e-3  # of the float64 tolerance: the stages compute the unsplit model's arithmetic


def test_stages_are_consecutive_units_as_even_as_possible():
    assert stage_bounds(4, 2) == [range(0, 2), range(2, 4)]
    assert stage_bounds(4, 3) == [range(0, 2), range(2, 3), range(3, 4)]  # the middle stage holds decoder layer 1
    assert stage_bounds(4, 4) == [range(i, i + 1) for i in range(4)]
    assert stage_bounds(6, 4) == [range(0, 2), range(2, 4), range(4, 5), range(5, 6)]
    with pytest.raises(AssertionError):
        stage_bounds(4, 5)


SLOW_FAMILIES = [pytest.param(family, marks=pytest.mark.slow) for family in ("qwen3_5", "qwen2_5_vl")]


@pytest.mark.parametrize("family", ["llama", *SLOW_FAMILIES])
def test_stages_composed_are_the_unsplit_model(family):
    """Embedding, layers and head run stage after stage give the unsplit forward's logits and gradients exactly."""
    case = build(setting_for(family, "float64", "cpu"))[SINGLE]
    whole, split = (load_model(case.model.checkpoint, torch.float64) for _ in range(2))
    torch.manual_seed(0)
    ids_BT = torch.randint(0, whole.config.vocab_size if hasattr(whole.config, "vocab_size") else whole.config.text.vocab_size, (2, 12))
    segments_BT = torch.tensor([[0] * 7 + [1] * 5, [0] * 3 + [1] * 9])
    positions_BT = torch.cat([torch.arange(7), torch.arange(5)]).expand(2, 12).clone()
    positions_BT[1] = torch.cat([torch.arange(3), torch.arange(9)])
    expected = whole(ids_BT, positions_BT, segments_BT, "sdpa")
    expected.pow(2).mean().backward()
    x = ids_BT
    for stage in range(3):
        x = build_stage(split, 3, stage)(x, layer_inputs(split, positions_BT, segments_BT, "sdpa"))
    x.pow(2).mean().backward()
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-12)
    grads = dict(whole.named_parameters())
    for name, parameter in split.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-12, atol=1e-14, msg=name)


def test_three_stages_on_gloo_give_the_single_process_step(verdict_of):
    """pp3 (a middle stage holding decoder layer 1, two micro-batches) against the single process, every quantity. The
    session's reference verdict of pp_vs_nopp on llama (shared with the sensitivity proof: no extra launch); its mesh
    check (harness/collectives/mesh_use.py) already failed any stage that exchanged nothing with its neighbours."""
    verdict = verdict_of("reference", "pp_vs_nopp", "llama")
    rows = [c for c in verdict.comparisons if c.arms.arm.name == "pp3"]
    assert {"grad", "logprobs", "loss", "params_after"} <= {c.quantity for c in rows}
    worst = max(rows, key=lambda c: c.margin)
    assert worst.margin <= CLEAN, worst.headline()


def test_more_stages_than_units_are_refused_with_the_field_and_the_limit():
    case = build(setting_for("llama", "float64", "cpu"))["pp4"]
    reason = ReferenceEngine().unsupported_reason(case.with_(parallel=ParallelPlan(pp=5)))
    assert reason is not None and "parallel.pp=5" in reason and "at most 4" in reason, reason
    assert ReferenceEngine().unsupported_reason(case) is None


def p2p(op: str, peer: int) -> dict:
    return {"op": op, "group": [], "args": {"dst" if op == "send" else "src": peer}}


def test_a_pipeline_arm_whose_stages_never_exchanged_is_flagged():
    plan = ParallelPlan(pp=3)
    chained = [[p2p("send", 1), p2p("recv", 1)], [p2p("recv", 0), p2p("send", 2), p2p("recv", 2), p2p("send", 0)],
               [p2p("recv", 1), p2p("send", 1)]]
    assert unused_pipeline(plan, chained) == []
    alone = [[{"op": "all_reduce", "group": [0, 1, 2], "args": {}}] for _ in range(3)]
    problems = unused_pipeline(plan, alone)
    assert len(problems) == 3 and "did not run pipeline-parallel" in problems[1] and "[0, 2]" in problems[1], problems
    assert unused_pipeline(dataclasses.replace(plan, pp=1), alone) == []


@pytest.mark.slow
def test_a_micro_batch_of_several_forwards_runs_each_through_the_stages(run_arm):
    """Stacked layout: length buckets make a micro-batch several forwards of different shapes, each sent through pp3."""
    cases = build(setting_for("llama", "float64", "cpu"))
    stacked = cases["pp3"].with_(layout=Layout(kind=LayoutKind.STACKED))
    single, pp3 = run_arm("reference", cases[SINGLE]), run_arm("reference", stacked)
    rows = compare_results(Arms("pp3_stacked", SINGLE), pp3, single, tolerance_for("float64"), lambda i, t: f"{i}:{t}",
                           optimizer=cases[SINGLE].optimizer)
    worst = max(rows, key=lambda c: c.margin)
    assert worst.margin <= CLEAN, worst.headline()
