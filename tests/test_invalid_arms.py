"""A NaN does not hide the bug (issue 16): an arm whose result breaks the contract is set apart, the
valid arms are still judged, every arm is saved, and the diagnosis names the micro-batch without loss
tokens first (harness/run/invalid_arms.py).

The engine is mutant.empty-microbatch-nan (each micro-batch divided by its own unguarded count) on
microbatch_invariance, whose `singletons` arm has a micro-batch with no loss token. The verdict is
the mutant proof's cell (verdict_of, shared); the run that saves its arms sits on the mutant's
worker (conftest.py), in its warm launches.
"""

from __future__ import annotations

import json

import pytest
from packcheck.harness.compare import ArmId
from packcheck.harness.contract import ParallelPlan, Partition
from packcheck.harness.engines import Problem, ProblemKind, problems_from_json
from packcheck.harness.provenance import provenance
from packcheck.harness.report.html import render_html
from packcheck.harness.run.invalid_arms import CONTRACT_SENTENCE, blocks_judging, empty_micro_batches, invalid_diagnosis, summarise
from packcheck.harness.run.outcomes import ArmOutcome, Kind
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.results import ResultsFile
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario, setting_for
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import SCENARIOS

BUG = "empty-microbatch-nan"
SCENARIO = "microbatch_invariance"
EMPTY = "micro-batch 4 (sample 4) of arm 'singletons' has no loss tokens"
NAN_LOSS = Problem(kind=ProblemKind.NON_FINITE, field="loss", sentence="result.loss is nan, expected a finite float")


@pytest.fixture(scope="module")
def cases():
    return SCENARIOS[SCENARIO].build(setting_for("llama", "float64", "cpu"))


def non_finite(field: str, tensor: str | int, count: int) -> Problem:
    return Problem(kind=ProblemKind.NON_FINITE, field=field, tensor=tensor, count=count,
                   sentence=f"result.{field}[{tensor!r}] has {count} non-finite values (NaN/inf)")


def invalid_arm(cases, name: str, problems: list[Problem]) -> ArmOutcome:
    return ArmOutcome(arm=ArmId(name), case=cases[name], kind=Kind.INVALID, stage=0, problems=tuple(problems))


def valid_arm(cases, name: str) -> ArmOutcome:
    return ArmOutcome(arm=ArmId(name), case=cases[name], kind=Kind.RAN, stage=0)


def test_the_scenario_has_an_arm_with_a_micro_batch_without_loss_tokens(cases):
    assert empty_micro_batches(cases["singletons"]) == ["micro-batch 4 (sample 4)"]
    assert empty_micro_batches(cases["uneven"]) == [] and empty_micro_batches(cases["one"]) == []


def test_an_empty_micro_batch_of_a_data_parallel_rank_names_its_rank(cases):
    case = cases["singletons"]
    dp = case.with_(partition=Partition(per_rank=(((0,), (1, 2, 3)), ((4,), (5, 6, 7, 8)))), parallel=ParallelPlan(dp=2))
    assert empty_micro_batches(dp) == ["micro-batch 0 of rank 1 (sample 4)"]


def test_the_diagnosis_points_at_the_empty_micro_batch_only_when_the_result_is_not_finite(cases):
    nan = [invalid_arm(cases, "singletons", [NAN_LOSS])]
    assert invalid_diagnosis(nan).startswith(EMPTY) and CONTRACT_SENTENCE in invalid_diagnosis(nan)
    elsewhere = [invalid_arm(cases, "uneven", [non_finite("grads", "lm_head.weight", 3)])]
    assert "although every micro-batch has loss tokens" in invalid_diagnosis(elsewhere)
    negative = Problem(kind=ProblemKind.VALUE, field="num_loss_tokens", sentence="result.num_loss_tokens is -1, expected a non-negative int")
    other = [invalid_arm(cases, "singletons", [negative])]
    assert invalid_diagnosis(other) == ("the engine broke the result contract on arm 'singletons': "
                                        "result.num_loss_tokens is -1, expected a non-negative int")
    true = Problem(kind=ProblemKind.TYPE, field="loss", sentence="result.loss is True, expected a finite float")
    alike = [invalid_arm(cases, name, [true]) for name in ("one", "uneven")]
    assert invalid_diagnosis(alike) == ("the engine broke the result contract on arms 'one', 'uneven': "
                                               "result.loss is True, expected a finite float")


def test_the_non_finite_tensors_of_a_field_are_one_line_and_every_other_problem_stays():
    notes = Problem(kind=ProblemKind.TYPE, field="notes", sentence="result.notes is list, expected a dict of JSON values")
    problems = [NAN_LOSS, *(non_finite("grads", f"layer.{i}", i + 1) for i in range(3)), non_finite("logprobs", 2, 1), notes]
    assert summarise(problems) == ["result.loss is nan, expected a finite float",
                                   "result.grads: 3 tensors have non-finite values (NaN/inf), e.g. ['layer.0'] (1 values)",
                                   "result.logprobs[2] has 1 non-finite values (NaN/inf)",
                                   "result.notes is list, expected a dict of JSON values"]


def test_an_invalid_required_arm_leaves_the_others_unjudged_and_says_why(cases):
    scenario = SCENARIOS["packed_vs_unpacked"]
    built = scenario.build(setting_for("llama", "float64", "cpu"))
    required = sorted(set(built) - scenario.optional_arms)
    nan = [NAN_LOSS]
    outcomes = [invalid_arm(built, required[0], nan), valid_arm(built, "stacked")]
    assert blocks_judging(scenario, outcomes) == (f"The other arms were not compared: arm {required[0]!r} is the one they are "
                                                  "judged against")
    assert blocks_judging(scenario, outcomes[:1]) == "No arm returned a valid result: nothing is left to compare"
    assert blocks_judging(SCENARIOS[SCENARIO], [invalid_arm(cases, "singletons", nan), valid_arm(cases, "one")]) is None


def test_a_nan_fails_the_verdict_names_the_empty_micro_batch_first_and_the_valid_arms_are_judged(verdict_of):
    verdict: Verdict = verdict_of(f"mutant.{BUG}", SCENARIO, "llama")
    assert verdict.status == "fail", verdict.message()
    assert verdict.diagnosis.startswith(EMPTY) and CONTRACT_SENTENCE in verdict.diagnosis, verdict.diagnosis
    assert "The valid arms disagree too" in verdict.diagnosis and "mean of means" in verdict.diagnosis, verdict.diagnosis
    judged = {c.arms.arm.name for c in verdict.comparisons if c.quantity != "result"}
    assert judged == {"uneven", "shuffled", "uneven_unpacked", "dp2_uneven"}, "every valid arm is compared, the invalid one is not"
    assert [c.arms.arm for c in verdict.comparisons if c.quantity == "result"] == [ArmId("singletons")]


@pytest.mark.parametrize("bug", [BUG])  # grouped with the mutant's proof cells (conftest.py): its launches are warm
def test_every_arm_is_saved_and_the_report_shows_the_invalid_one(packcheck_pool, tmp_path, bug):
    engine = f"mutant.{bug}"
    saved = RunDir(tmp_path).arms(engine, "llama", SCENARIO)
    verdict = run_scenario(engine, SCENARIOS[SCENARIO], "llama", save_dir=saved,
                           options=RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool))
    assert verdict.status == "fail" and verdict.diagnosis.startswith(EMPTY), verdict.message()
    assert sorted(p.name for p in saved.iterdir()) == sorted(SCENARIOS[SCENARIO].build(setting_for("llama", "float64", "cpu")))
    saved_problems = json.loads((saved / "singletons" / "invalid.json").read_text())
    assert saved_problems["problems"][0] == "result.loss is nan, expected a finite float"
    assert problems_from_json(saved_problems)[0] == NAN_LOSS, "the typed problems are saved beside the sentences"
    assert (saved / "singletons" / "result.safetensors").is_file(), "the NaN result itself is kept"
    assert not (saved / "uneven" / "invalid.json").exists()
    results = ResultsFile(RunDir(tmp_path), provenance("cpu"))
    results.add(verdict)
    results.write()
    page = render_html(tmp_path)
    assert "(invalid result: result.loss is nan, expected a finite float)" in page
    assert "has no loss tokens" in page and "mean of means" in page
