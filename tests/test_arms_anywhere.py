"""Every arm checked on any machine: on a cuda run, an arm with more ranks than the machine has GPUs runs its
ranks on the CPU in float64 over gloo, is judged against CPU float64 baselines, and the verdict and the run's
summary say so. PACKCHECK_VISIBLE_GPUS stands in for the GPUs this CPU machine does not have."""

from __future__ import annotations

import dataclasses

import pytest
from packcheck.harness.compare import ArmId, Arms, Comparison, Pass
from packcheck.harness.launch.capacity import VISIBLE_GPUS_ENV, cannot_host, visible_gpus
from packcheck.harness.run import placement
from packcheck.harness.run.conclusion import NOTHING_TO_COMPARE, PassVerdict
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.session import where_arms_ran
from packcheck.harness.judging.status import Status
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import SCENARIOS

DISTRIBUTED = ("cp_vs_nocp", "dp_cp_reduction")


@pytest.mark.parametrize("scenario", DISTRIBUTED)
def test_with_one_visible_gpu_the_distributed_arms_are_planned_onto_the_cpu_in_float64(monkeypatch, scenario):
    monkeypatch.setenv(VISIBLE_GPUS_ENV, "1")
    assert visible_gpus() == 1
    setting = Inputs().setting("llama", "bfloat16", "cuda")
    cases = SCENARIOS[scenario].build(setting)
    moved = sorted(name for name, case in cases.items() if placement.needs_more_gpus(case))
    assert moved == sorted(name for name, case in cases.items() if case.parallel.world_size > 1) and moved
    assert "needs 2 GPUs (one per rank); this machine has 1" in cannot_host(cases[moved[0]]) or "needs 4 GPUs" in cannot_host(cases[moved[0]])
    assert not placement.required_arm_moves(SCENARIOS[scenario], cases), "the single-process baseline stays on the GPU"
    cpu = SCENARIOS[scenario].build(placement.logic_setting(setting))
    assert all((case.device, case.dtype) == ("cpu", "float64") for case in cpu.values())
    assert {name: c.with_(device="cuda", dtype="bfloat16").digest() for name, c in cpu.items()} == {n: c.digest() for n, c in cases.items()}


def test_with_no_visible_gpu_even_the_baseline_moves(monkeypatch):
    monkeypatch.setenv(VISIBLE_GPUS_ENV, "0")
    cases = SCENARIOS["microbatch_invariance"].build(Inputs().setting("llama", "bfloat16", "cuda"))
    assert placement.required_arm_moves(SCENARIOS["microbatch_invariance"], cases)


def test_a_bad_override_names_the_variable(monkeypatch):
    monkeypatch.setenv(VISIBLE_GPUS_ENV, "two")
    with pytest.raises(ValueError, match="PACKCHECK_VISIBLE_GPUS='two': give a number of GPUs"):
        visible_gpus()


CELL = Verdict(engine="e", family="llama", scenario="dp_cp_reduction", dtype="bfloat16", device="cuda", status=Status.PASS)
MOVED = ArmId("dp2_cp1_uneven")


def comparison(arm: ArmId, observed: float) -> Comparison:
    return Comparison(arms=Arms(arm, ArmId("single", pass_=arm.pass_)), quantity="loss", item="", metric="rel", observed=observed,
                      threshold=1.0)


def test_the_cpu_arms_judgement_is_merged_side_by_side_and_named():
    here = PassVerdict(status=Status.UNSUPPORTED, nothing_to_compare=True, judged=True)
    logic = PassVerdict(status=Status.PASS, comparisons=(comparison(MOVED.in_pass(Pass.CPU_LOGIC), 1e-9),), judged=True)
    v = placement.placed(CELL, here, logic, [MOVED], [MOVED.local])
    assert v.status == Status.PASS and v.relocated_arms == ("dp2_cp1_uneven",) and NOTHING_TO_COMPARE not in v.detail
    assert [str(c.arms) for c in v.comparisons] == ["cpu_float64/dp2_cp1_uneven vs cpu_float64/single"]
    assert "ran on the CPU in float64 (gloo)" in v.message() and v.to_json()["relocated_arms"] == ["dp2_cp1_uneven"]
    alone = placement.placed(CELL, here, None, [], [])
    assert alone.status == Status.UNSUPPORTED and alone.detail == NOTHING_TO_COMPARE

    failing = PassVerdict(status=Status.PASS, comparisons=(comparison(ArmId("other"), 0.1),), judged=True)
    bad = PassVerdict(status=Status.FAIL, diagnosis="a count reduced over WORLD", comparisons=(comparison(MOVED.in_pass(Pass.CPU_LOGIC), 1e7),),
                      judged=True)
    v = placement.placed(CELL, failing, bad, [MOVED], [MOVED.local])
    assert v.status == Status.FAIL and v.diagnosis == "(arms on cpu float64) a count reduced over WORLD"
    assert len(v.comparisons) == 2


def test_the_summary_counts_where_the_arms_ran():
    v = CELL
    assert where_arms_ran([v]) == ""
    v = dataclasses.replace(v, arms_run={"cuda bfloat16": 1, "cpu float64": 5}, relocated_arms=("a", "b", "c", "d"))
    assert where_arms_ran([v, v]) == ("arms: 10 on cpu float64, 2 on cuda bfloat16; 8 arm(s) with more ranks than this machine has GPUs "
                                      "ran on the CPU in float64 (gloo), judged against CPU float64 baselines")


@pytest.mark.slow  # 5 arms over world 1, 2 and 4 launches per engine: the same verdict on cpu is in the default suite
@pytest.mark.parametrize("engine,clean", [("reference", True), ("mutant.dp-count-world-group", False)])
def test_a_cuda_run_without_gpus_judges_every_arm_on_the_cpu(monkeypatch, packcheck_pool, engine, clean):
    """End to end on this CPU machine: --device cuda with no GPU visible; the dp x cp arms run over gloo in float64
    and their logic is judged (the reference passes with a clean margin, the mutant fails by orders of magnitude)."""
    from packcheck.harness.run.scenario_runner import RunOptions, run_scenario

    monkeypatch.setenv(VISIBLE_GPUS_ENV, "0")
    v = run_scenario(engine, SCENARIOS["dp_cp_reduction"], "llama", "bfloat16", "cuda", options=RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool))
    assert sorted(v.relocated_arms) == ["dp1_cp2_ulysses", "dp2_cp1_rank_without_tokens", "dp2_cp1_uneven", "dp2_cp2_ring", "single"]
    assert v.arms_run == {"cpu float64": 5} and all(c.arms.arm.pass_ is Pass.CPU_LOGIC for c in v.comparisons)
    if clean:
        assert v.status == Status.PASS and v.worst.margin <= 1e-3, v.message()
    else:
        assert v.status == Status.FAIL and v.worst.margin >= 1e6, v.message()



class OneGpuOnTheCpu:
    """The session's pool, standing in for a one-GPU machine: a world-1 cuda arm runs on the CPU (in its asked dtype,
    float64 here), so pass 1 of a cuda verdict runs on this machine; anything else goes through unchanged."""

    def __init__(self, pool):
        self.pool = pool

    def __getattr__(self, name):
        return getattr(self.pool, name)

    def engine_info(self, spec, device):
        return self.pool.engine_info(spec, "cpu")

    def run(self, spec, case, mode="run", key=None):
        assert not (case.device == "cuda" and case.parallel.world_size > 1), f"arm {case.name} was launched on cuda with 1 GPU"
        return self.pool.run(spec, case.with_(device="cpu") if case.device == "cuda" else case, mode, key)


@pytest.mark.slow  # two verdicts' worth of arms (world 1, 2 and 4 launches)
@pytest.mark.parametrize("engine,clean", [("reference", True), ("mutant.ga-mean-of-means", False)])
def test_with_one_gpu_the_baseline_stays_and_the_dp_arm_runs_on_the_cpu(monkeypatch, packcheck_pool, engine, clean):
    from packcheck.harness.run.scenario_runner import RunOptions, run_scenario

    monkeypatch.setenv(VISIBLE_GPUS_ENV, "1")
    v = run_scenario(engine, SCENARIOS["microbatch_invariance"], "llama", "float64", "cuda",
                     options=RunOptions(timeout=packcheck_pool.timeout, pool=OneGpuOnTheCpu(packcheck_pool)))
    dp_arms = sorted(name for name, case in SCENARIOS["microbatch_invariance"].build(Inputs().setting("llama", "float64", "cuda")).items()
                     if case.parallel.world_size > 1)
    assert list(v.relocated_arms) == dp_arms and v.arms_run["cpu float64"] > len(dp_arms) and v.arms_run["cuda float64"] >= 2, v.message()
    assert any(c.arms.arm == ArmId(dp_arms[0], pass_=Pass.CPU_LOGIC) for c in v.comparisons), "the moved arm is judged on the CPU"
    assert any(c.arms.arm.pass_ is Pass.MAIN for c in v.comparisons), "the hosted arms are judged on their device"
    if clean:
        assert v.status == Status.PASS and v.worst.margin <= 1e-3, v.message()
    else:
        assert v.status == Status.FAIL and v.worst.margin >= 1e6, v.message()


def test_at_a_realistic_size_the_cpu_pass_checks_the_logic_at_the_family_tiny_size(monkeypatch):
    """A float64 CPU step of the 0.6b preset needs tens of GiB per rank: the relocated arms and their baselines run at
    the family's tiny size, same seed and arm names, and the verdict says so. (The 0.6b setting is stood in for by its
    name: building its weights takes a minute.)"""
    monkeypatch.setenv(VISIBLE_GPUS_ENV, "1")
    tiny = Inputs(seed=3).setting("llama", "bfloat16", "cuda")
    realistic = dataclasses.replace(tiny, model_name="0.6b", data_scale=85)
    logic = placement.logic_setting(realistic)
    assert (logic.device, logic.dtype, logic.model_name, logic.data_scale, logic.seed) == ("cpu", "float64", "tiny", 1, 3)
    assert logic.model == Inputs(seed=3).setting("llama", "float64", "cpu").model
    assert set(SCENARIOS["cp_vs_nocp"].build(logic)) == set(SCENARIOS["cp_vs_nocp"].build(realistic))
    assert "at llama's tiny size, seed 3" in placement.logic_note(realistic, logic)
    same = placement.logic_setting(tiny)
    assert (same.model, same.data_scale) == (tiny.model, tiny.data_scale) and placement.logic_note(tiny, same) == ""
