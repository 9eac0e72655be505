"""Shrinking (harness/shrink): a failing verdict ends at a case at least 5x smaller in tokens that still fails the same
comparison with the same class of diagnosis, the reference (the control) passing it, within the budget; the case file
replays the failure from another directory; a passing verdict is refused.

The one proof in the default run drives the command line end to end on mutant.cross-doc-attention (packed_vs_unpacked):
`packcheck run --shrink`, the summary and JUnit naming the shrunk size and the replay command, `packcheck replay` from a
fresh directory (fails: exit 1; the reference, the control, passed every case kept), and `packcheck shrink` of a
passing verdict (refused: exit 2). The other public mutants, each with the scenarios that flag it, are in nox -s slow.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.contract import ContractError, ParallelPlan, Partition, Sample
from packcheck.harness.data.size import Size, before_after
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.models.smaller import NotSmaller, layer_count, smaller_config
from packcheck.harness.report import render_junit, render_markdown
from packcheck.harness.scenarios import get_scenario
from packcheck.harness.scenarios.base import ORACLE_ENGINE
from packcheck.harness.shrink.driver import NothingToShrink, shrink
from packcheck.harness.shrink.record import read_shrunk, write_shrunk
from packcheck.harness.shrink.replay import replay
from packcheck.harness.shrink.search import fitting_cuts, scaled_cuts
from packcheck.harness.shrink.subject import Subject

BUDGET = 120.0  # seconds per verdict: the bound on the CPU
ENOUGH = 5  # times fewer tokens at least


def test_smaller_keeps_cuts_and_maps_partitions_onto_the_kept_samples():
    samples = [Sample(input_ids=list(range(n)), loss_mask=[0] + [1] * (n - 1)) for n in (5, 6, 7, 8)]
    smaller = Smaller(documents=(1, 3), lengths=((3, 2),))
    assert [len(s.input_ids) for s in smaller.samples(samples)] == [6, 2]
    assert smaller.samples(samples)[1].loss_mask == (0, 1)
    assert smaller.positions(range(4)) == [(1, 0), (3, 1)]
    # rank 0 keeps sample 1 (its first micro-batch empties), rank 1 sample 3; dp 2 -> 1 folds rank 1 into rank 0
    partition = Partition(per_rank=(((0,), (1,)), ((2,), (3,))))
    assert smaller.partition(partition).per_rank == (((0,),), ((1,),))
    assert Smaller(documents=(1, 3), dp=1).partition(partition).per_rank == (((0, 1),),)
    assert Smaller(dp=1, micro_batches=1).partition(Partition(per_rank=(((0,), (1,)), ((2,), (3,))))).per_rank == (((0, 2, 1, 3),),)
    assert Smaller(dp=1, cp=1).parallel(ParallelPlan(dp=2, cp=2, cp_style="ring")) == ParallelPlan()
    with pytest.raises(ContractError, match="rank 1 .* without a sample"):
        Smaller(documents=(0, 1)).partition(Partition(per_rank=(((0, 1),), ((2, 3),))))
    assert Smaller.from_json(json.loads(json.dumps(smaller.to_json()))) == smaller


def test_the_row_pass_scales_a_row_with_its_documents_then_cuts_the_row_alone():
    # the two documents cross-doc-attention kept at 0.6b, in one row of 4080 tokens
    together = {8: 425, 9: 1190}
    for shorter in range(2, 4081):
        cuts = {**together, **scaled_cuts(together, 4080, shorter)}
        assert sum(cuts.values()) <= shorter, f"a row of {shorter}: {cuts} no longer fit it together"
    assert scaled_cuts(together, 4080, 8) == {8: 1, 9: 2}
    assert scaled_cuts(together, 4080, 4080) == {}, "the row as it is: nothing cut"
    # a document at a CP shard's edge: the row alone, the longer documents cut to it, the shorter kept
    assert fitting_cuts({6: 4, 7: 2, 9: 10}, 5) == {9: 5}


def test_the_sizes_are_said_in_words():
    before = Size(tokens=112, documents=10, rows=3, ranks=1, micro_batches=1, layers=2)
    after = Size(tokens=4, documents=2, rows=1, ranks=1, micro_batches=1, layers=1)
    assert before_after(before, after) == ("tokens 112 -> 4 (28x fewer), documents 10 -> 2, rows 3 -> 1, layers 2 -> 1 "
                                           "(kept: 1 rank, 1 micro-batch)")


def test_a_smaller_model_cuts_layers_everywhere_the_family_counts_them():
    hybrid = {"num_hidden_layers": 4, "layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    assert smaller_config("qwen3_5", hybrid, layers=2)["layer_types"] == ["linear_attention"] * 2
    vlm = {"num_hidden_layers": 2, "text_config": {"num_hidden_layers": 2}}
    assert layer_count(smaller_config("qwen2_5_vl", vlm, layers=1)) == 1
    config = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 64, "intermediate_size": 128}
    dense = smaller_config("llama", config, heads=2, width=32)
    assert (dense["head_dim"], dense["num_attention_heads"], dense["num_key_value_heads"], dense["intermediate_size"]) == (16, 2, 2, 32)
    assert smaller_config("llama", config, heads=8) == config, "more heads than the model has: as it is"
    with pytest.raises(NotSmaller, match="takes \\[1, 2, 4\\] heads"):
        smaller_config("llama", config, heads=3)  # 64 wide: transformers wants heads that divide it


def test_run_shrink_writes_a_case_that_replays_from_anywhere(tmp_path, capsys):
    """The one end-to-end proof: cross-document attention, packed_vs_unpacked, through the command line."""
    out = tmp_path / "run"
    code = main(["run", "--engine", "mutant.cross-doc-attention", "reference", "--family", "llama", "--scenario", "packed_vs_unpacked",
                 "--out", str(out), "--no-report", "--shrink"])
    printed = capsys.readouterr()
    assert code == 1, printed.err
    case_file = out / "shrunk" / "mutant.cross-doc-attention" / "llama" / "packed_vs_unpacked.json"
    data = json.loads(case_file.read_text())
    assert data["before"]["tokens"] >= ENOUGH * data["after"]["tokens"], data["after"]
    assert data["search"]["seconds"] < BUDGET and data["search"]["control"] == ORACLE_ENGINE
    assert data["comparison"] == "logprobs (packed vs unpacked)" and data["diagnosis_class"] == "the scenario's own reading"
    assert f"replay: {data['replay']}" in printed.out.splitlines() and "shrunk packed_vs_unpacked [mutant.cross-doc-attention" in printed.err
    assert not (out / "shrunk" / "reference").exists(), "a passing verdict is not shrunk"

    summary, junit = render_markdown(out), render_junit(out)
    assert f"tokens {data['before']['tokens']} -> {data['after']['tokens']}" in summary and data["replay"] in summary  # no &gt; (issue 45)
    assert data["replay"] in junit

    fresh = tmp_path / "elsewhere"
    fresh.mkdir()
    shutil.copy(case_file, fresh / "case.json")
    shutil.rmtree(out)  # nothing of the run is left: the file alone replays it
    assert main(["replay", str(fresh / "case.json")]) == 1
    replayed = capsys.readouterr()
    assert "packed_vs_unpacked [mutant.cross-doc-attention / llama / float64 / cpu]: FAIL" in replayed.out
    assert f"replay {fresh / 'case.json'}" in replayed.out  # the verdict's reproduce line is the replay command


def test_a_passing_verdict_is_refused_without_running_anything(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({
        "schema": "packcheck.results/1", "provenance": {"inputs": {"model": "tiny", "seed": 0}}, "rows": [],
        "verdicts": [{"engine": "reference", "engine_spec": "reference", "family": "llama", "scenario": "packed_vs_unpacked",
                      "dtype": "float64", "device": "cpu", "attention": "auto", "status": "pass"}]}))
    assert main(["shrink", str(out / "reference" / "llama" / "packed_vs_unpacked")]) == 2
    assert "nothing to shrink: the verdict passed" in capsys.readouterr().err
    assert main(["shrink", str(out)]) == 2
    assert "no failing verdict" in capsys.readouterr().err
    assert main(["shrink", str(out / "reference" / "qwen3" / "packed_vs_unpacked")]) == 2
    err = capsys.readouterr().err
    assert "no verdict of" in err and "reference/llama/packed_vs_unpacked" in err, err
    assert main(["shrink", str(out), "--budget", "0"]) == 2
    assert "--budget 0: give the seconds" in capsys.readouterr().err
    (tmp_path / "case.json").write_text(json.dumps({"schema": "packcheck.shrunk/1", "scenario": "packed_vs_unpacked"}))
    assert main(["replay", str(tmp_path / "case.json")]) == 2
    assert "field 'engine' is missing or malformed" in capsys.readouterr().err


def test_a_shrunk_case_keeps_the_arms_its_judge_compares_so_the_fixed_engine_passes_it(tmp_path, capsys, packcheck_pool):
    """Issue 45: empty-microbatch-nan's worst comparison is an invalid result (NaN) of one partitioned arm, judged
    against nothing; a correct engine's arm is judged against `one`. The case keeps `one` too, so the reference (the
    fixed engine) passes its replay, and the control line says what the reference did on the scenario's own case."""
    subject = Subject(engine="mutant.empty-microbatch-nan", engine_name="mutant.empty-microbatch-nan",
                      scenario=get_scenario("microbatch_invariance"), family="llama", dtype="float64", device="cpu")
    said: list[str] = []
    shrunk = shrink(subject, packcheck_pool, budget=BUDGET, say=said.append)
    assert f"  control: {ORACLE_ENGINE} passes the scenario's own case and must pass every smaller case kept" in said, said
    assert shrunk.control == ORACLE_ENGINE and shrunk.only is not None and "one" in shrunk.only - shrunk.target.arm_names, shrunk.only
    case_file = write_shrunk(shrunk, tmp_path / "case.json")
    assert json.loads(case_file.read_text())["only"] == sorted(shrunk.only)
    capsys.readouterr()
    assert main(["replay", str(case_file), "--engine", ORACLE_ENGINE]) == 0, capsys.readouterr().out
    assert "microbatch_invariance [reference / llama / float64 / cpu]: PASS" in capsys.readouterr().out
    assert main(["replay", str(case_file)]) == 1
    assert "microbatch_invariance [mutant.empty-microbatch-nan / llama / float64 / cpu]: FAIL" in capsys.readouterr().out


def test_a_trial_that_errs_says_what_the_error_was_in_one_line():
    """A shrink trial's line names the exception (a judge that crashed says only that it crashed; its traceback names it)."""
    from packcheck.harness.compare import Arms
    from packcheck.harness.run.judge import JUDGE_CRASHED
    from packcheck.harness.run.verdict import Verdict
    from packcheck.harness.shrink.target import Target

    try:
        {}["one"]
    except KeyError:
        import traceback

        crash = traceback.format_exc()
    verdict = Verdict(engine="reference", family="llama", scenario="microbatch_invariance", dtype="float64", device="cpu",
                      status="error", diagnosis=JUDGE_CRASHED, detail=crash)
    why = Target(arms=Arms("singletons", "one"), quantity="grad", rule=None).why_not(verdict)
    assert why == f"error: {JUDGE_CRASHED} (KeyError: 'one')" and "\n" not in why


def test_golden_regression_is_not_shrunk(packcheck_pool):
    subject = Subject(engine="mutant.cross-doc-attention", engine_name="mutant.cross-doc-attention",
                      scenario=get_scenario("golden_regression"), family="llama", dtype="float64", device="cpu")
    with pytest.raises(NothingToShrink, match="stored goldens"):
        shrink(subject, packcheck_pool)


def benchmark_cases() -> tuple:
    """benchmarks/shrink_mutants.py's CASES: each public mutant with the scenarios that flag it (the table of docs/shrink.md)."""
    spec = importlib.util.spec_from_file_location("shrink_mutants", Path(__file__).resolve().parents[1] / "benchmarks" / "shrink_mutants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


SLOW = [case for case in benchmark_cases() if case != ("mutant.cross-doc-attention", "packed_vs_unpacked", "llama")]  # that one: above


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "scenario", "family"), SLOW, ids=[f"{e}-{s}" for e, s, _ in SLOW])
def test_each_public_mutant_shrinks_five_times_and_replays(engine, scenario, family, packcheck_pool, tmp_path):
    subject = Subject(engine=engine, engine_name=engine, scenario=get_scenario(scenario), family=family, dtype="float64", device="cpu")
    shrunk = shrink(subject, packcheck_pool, budget=BUDGET)
    assert shrunk.before.tokens >= ENOUGH * shrunk.after.tokens, (shrunk.before, shrunk.after, shrunk.smaller)
    assert shrunk.seconds < BUDGET + 30, shrunk.seconds  # the budget is checked before each trial: the last may run past it
    assert shrunk.control == ORACLE_ENGINE and shrunk.target.holds(shrunk.verdict)
    case = read_shrunk(write_shrunk(shrunk, tmp_path / "case.json"))
    replayed = replay(case, packcheck_pool)
    assert shrunk.target.holds(replayed), replayed.message()
    assert replay(case, packcheck_pool, engine=ORACLE_ENGINE).status == "pass", "the reference passes what the shrink kept"


@pytest.mark.slow
def test_the_same_verdict_shrinks_to_the_same_case(packcheck_pool):
    """No randomness: the same trials in the same order, the same case (at another --seed too)."""
    from packcheck.harness.run.inputs import Inputs

    for seed in (0, 3):
        subject = Subject(engine="mutant.cross-doc-attention", engine_name="mutant.cross-doc-attention",
                          scenario=get_scenario("document_isolation"), family="llama", dtype="float64", device="cpu", inputs=Inputs(seed=seed))
        first, again = (shrink(subject, packcheck_pool, budget=BUDGET) for _ in range(2))
        assert first.complete and again.complete
        assert (first.smaller, first.trials, dict(first.arms)) == (again.smaller, again.trials, dict(again.arms))

