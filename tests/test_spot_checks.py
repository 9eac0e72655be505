"""The absolute check's draw of arms from the relative verdicts (harness/run/spot_checks.py): which arms can be drawn,
how many are kept, and that every arm offered has the same chance, so an engine cannot guess which of its arms the
float64 reference will judge again. The runs that judge drawn arms are in tests/test_absolute_check.py."""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from packcheck.harness.compare import ArmId, Arms, Comparison, Pass, Role
from packcheck.harness.engines import EngineInfo
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.run.spot_checks import SpotArm, SpotChecks, clip_reachable, failed_by_drawn
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import SCENARIOS
from packcheck.impls.reference.engine import ReferenceEngine

REFERENCE = EngineInfo(spec="reference", name="reference", capabilities=ReferenceEngine.capabilities)
OTHER = dataclasses.replace(REFERENCE, spec="other.engine", name="other.engine")


def draw(size: int = 2) -> SpotChecks:
    """A draw whose oracle is the reference's declaration (as the run's pool would report it)."""
    return SpotChecks(pool=None, size=size, oracle=REFERENCE)


@pytest.fixture(scope="module")
def arms():
    """packed_vs_unpacked's arms on llama in float32, by ArmId, with a stand-in result each (the draw never reads it)."""
    setting = setting_for("llama", "float32", "cpu")
    cases = {ArmId(name): case for name, case in SCENARIOS["packed_vs_unpacked"].build(setting).items()}
    return setting, cases, {arm: f"result of {arm.name}" for arm in cases}


def test_the_draw_keeps_at_most_its_size_named_by_scenario_and_arm(arms):
    setting, cases, results = arms
    spot = draw(size=2)
    spot.offer(OTHER, setting, "packed_vs_unpacked", cases, results)
    drawn = spot.take(OTHER, setting)
    assert len(drawn) == 2 <= len(cases)
    for name, (case, result, scenario) in drawn.items():
        arm = next(arm for arm in cases if name == f"packed_vs_unpacked/{arm.name}")
        assert scenario == "packed_vs_unpacked" and case.name == name and result == results[arm]
    assert spot.take(OTHER, setting_for("qwen3", "float32", "cpu")) == {}, "another family's draw is its own"


def test_only_the_engines_arms_of_the_runs_own_pass_are_drawn(arms):
    setting, cases, results = arms
    (arm, case), = list(cases.items())[:1]
    others = {ArmId(arm.name, Role.ORACLE): case, ArmId(arm.name, Role.ENGINE, Pass.CPU_LOGIC): case}
    spot = draw()
    spot.offer(OTHER, setting, "packed_vs_unpacked", others, {a: "r" for a in others})
    assert spot.take(OTHER, setting) == {}


def test_nothing_is_drawn_where_the_engine_is_the_oracle_in_float64(arms):
    _, cases, results = arms
    exact = setting_for("llama", "float64", "cpu")
    spot = draw()
    spot.offer(REFERENCE, exact, "packed_vs_unpacked", cases, results)
    assert spot.take(REFERENCE, exact) == {}, "the same code on the same case: nothing to learn, a run's worth of time"
    setting = setting_for("llama", "float32", "cpu")
    spot.offer(REFERENCE, setting, "packed_vs_unpacked", cases, results)
    assert len(spot.take(REFERENCE, setting)) == 2, "in float32 the reference is judged by its float64 self"


def test_an_arm_the_oracle_cannot_run_here_is_not_drawn(arms):
    setting, cases, results = arms
    on_gpu = {arm: case.with_(device="cuda") for arm, case in cases.items()}  # this CPU machine hosts no cuda case
    spot = draw()
    spot.offer(OTHER, setting, "packed_vs_unpacked", on_gpu, results)
    assert spot.take(OTHER, setting) == {}


def test_every_arm_offered_has_the_same_chance(arms):
    """A reservoir: after n arms each is kept with probability size/n whatever its place (a later arm is not favoured)."""
    setting, cases, results = arms
    first = next(iter(cases.items()))
    offered = {ArmId(f"arm{i}"): first[1] for i in range(8)}
    kept, trials = Counter(), 600
    for _ in range(trials):
        spot = draw(size=2)
        for arm, case in offered.items():  # one arm per verdict, as a run offers them
            spot.offer(OTHER, setting, "s", {arm: case}, {arm: "r"})
        kept.update(list(spot.take(OTHER, setting)))
    expected = trials * 2 / len(offered)  # 150; the binomial's standard deviation is 10.6
    assert all(abs(kept[f"s/arm{i}"] - expected) < 6 * 10.6 for i in range(8)), kept


def test_a_clipped_policy_arm_is_drawn_only_where_its_tolerance_keeps_every_token_off_a_clip_boundary():
    """At step 0 every ratio is 1, 0.18 nats below clip_high's boundary: a bfloat16 tolerance (nats) reaches it, and the
    float64 oracle's weight there may be 0 where the engine's is -A r; a float32 one (about 0.001) does not."""
    setting = setting_for("llama", "float32", "cpu")
    case = next(case for case in SCENARIOS["rl_loss_aggregation"].build(setting).values() if case.loss.is_policy)
    at_step_0 = SimpleNamespace(logprobs=[torch.tensor(s.old_logprobs, dtype=torch.float32) for s in case.samples])
    assert not clip_reachable(case, at_step_0, tolerance=1.2e-3)
    assert clip_reachable(case, at_step_0, tolerance=0.19)
    sft = SCENARIOS["packed_vs_unpacked"].build(setting)["packed"]
    assert not clip_reachable(sft, at_step_0, tolerance=10.0), "no clip, nothing to cross"


def failing(arm: str) -> Comparison:
    return Comparison(arms=Arms(arm, ArmId(arm, Role.ORACLE)), quantity="logprobs", item="", metric="max_abs", observed=1.0,
                      threshold=1e-10)


def test_a_verdict_failed_by_a_drawn_arm_reproduces_with_the_scenario_it_was_drawn_from_and_every_arm_drawn(arms):
    setting, cases, results = arms
    (arm, case), = list(cases.items())[:1]
    given = {"packed_vs_unpacked/stacked": SpotArm(case, results[arm], "packed_vs_unpacked"),
             "document_isolation/single": SpotArm(case, results[arm], "document_isolation")}
    verdict = Verdict(engine="e", family="llama", scenario="oracle_agreement", dtype="float64", device="cpu", status="fail",
                      comparisons=(failing("packed_vs_unpacked/stacked"), failing("packed")))
    drawn = failed_by_drawn(verdict, given)
    assert drawn.drawn_from == ("packed_vs_unpacked",), "only the scenarios whose drawn arms failed"
    assert "--scenario packed_vs_unpacked oracle_agreement " in drawn.reproduce and drawn.reproduce.endswith(" --spot-arms all")
    own = failed_by_drawn(dataclasses.replace(verdict, comparisons=(failing("packed"),)), given)
    assert "--scenario oracle_agreement " in own.reproduce and "--spot-arms" not in own.reproduce
