"""Bad arguments and bad input files: exit 2 with one line that names the problem and the fix, never
a traceback, and nothing written where it should not be."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from packcheck.harness.cli.main import main

RUN = ["run", "--engine", "reference", "--family", "llama", "--scenario", "packed_vs_unpacked", "--no-report"]


def one_line_error(capsys, *expected: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def test_out_pointing_at_a_file(tmp_path, capsys):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    assert main([*RUN, "--out", str(target)]) == 2
    one_line_error(capsys, "--out", "is a file", "point --out at a directory")
    assert target.read_text() == "keep me"


def test_out_where_nothing_can_be_written(capsys):
    assert main([*RUN, "--out", "/proc/packcheck-results"]) == 2  # unwritable even for root
    one_line_error(capsys, "--out /proc/packcheck-results", "cannot write there", "choose a writable directory")


@pytest.mark.parametrize("timeout", ["-5", "0", "nan", "inf"])
def test_a_timeout_that_is_not_positive(tmp_path, capsys, timeout):
    assert main([*RUN, "--timeout", timeout, "--out", str(tmp_path)]) == 2
    one_line_error(capsys, "--timeout", "a positive finite number")


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"k": {"status": "maybe"}}', "\udcff"])
def test_bisect_on_a_corrupt_cache(tmp_path, capsys, content):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    cache = tmp_path / "bisect.json"
    cache.write_bytes(b"\xff\xfe" if content == "\udcff" else content.encode())
    code = main(["bisect", "--engine", "reference", "--family", "llama", "--good", "HEAD", "--bad", "HEAD",
                 "--cache", str(cache), "--repo", str(repo)])
    assert code == 2
    one_line_error(capsys, f"--cache {cache}", "delete it")
    assert not (tmp_path / "results.json").exists()


def test_an_engine_spec_that_resolves_to_nothing(tmp_path, capsys):
    assert main(["run", "--engine", "no_such_package.engine:Engine", "--family", "llama", "--scenario", "packed_vs_unpacked",
                 "--out", str(tmp_path / "out"), "--no-report"]) == 2
    one_line_error(capsys, "--engine no_such_package.engine:Engine: no module 'no_such_package' on this Python's import path")
    assert not (tmp_path / "out").exists(), "refused before anything starts (tests/test_engine_does_not_start.py)"


@pytest.fixture(scope="module")
def one_finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    assert main([*RUN, "--out", str(out)]) == 0
    return out


@pytest.fixture()
def finished_run(one_finished_run, tmp_path):
    """A copy of one finished run for each test to damage: the run itself (a zygote's start, ~7 s) is made once."""
    copy = tmp_path / "run"
    shutil.copytree(one_finished_run, copy, symlinks=True)
    return copy


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda text: text[: len(text) // 2], "is not valid JSON"),
    (lambda text: "\x00\xff garbled", "is not valid JSON"),
    (lambda text: json.dumps({**json.loads(text), "schema": "someone.else/3"}), "has schema 'someone.else/3'"),
    (lambda text: json.dumps({**json.loads(text), "verdicts": [{"engine": "x"}]}), "verdicts[0].family is missing"),
    (lambda text: json.dumps({**json.loads(text), "rows": "many"}), "'rows' is str, expected a list"),
    (lambda text: "[1, 2]", "has schema 'list'"),
])
def test_report_on_a_damaged_results_file(finished_run, capsys, damage, expected):
    results = finished_run / "results.json"
    results.write_text(damage(results.read_text()))
    assert main(["report", str(finished_run)]) == 2
    one_line_error(capsys, str(results), expected)
    assert not (finished_run / "report.html").exists()


def test_report_reads_the_lines_of_a_run_that_never_finished(finished_run, capsys):
    from packcheck.harness.run_dir import RunDir

    (finished_run / "results.json").unlink()  # as a kill mid-run leaves it: no results.json, no seal, the run's mark
    RunDir(finished_run).seal.unlink()
    RunDir(finished_run).in_progress.write_text('{"pid": 1, "started": "2026-12-05 10:00:00"}')
    with open(finished_run / "results.jsonl", "a") as lines:
        lines.write('{"verdict": {"engine": "cut sh')  # the line a kill cut short
    assert main(["report", str(finished_run), "--junit", str(finished_run / "junit.xml"),
                 "--markdown", str(finished_run / "summary.md")]) == 0
    html = (finished_run / "report.html").read_text()
    assert "packed_vs_unpacked" in html and "this run did not finish" in html
    assert "1 line(s) cut short" in capsys.readouterr().err
    junit = (finished_run / "junit.xml").read_text()
    assert 'tests="2"' in junit and 'errors="1"' in junit and 'name="finished"' in junit  # a CI gate sees it red
    assert "this run did not finish" in (finished_run / "summary.md").read_text()


def test_report_on_a_run_that_recorded_no_verdict(finished_run, capsys):
    (finished_run / "results.json").unlink()
    lines = finished_run / "results.jsonl"
    lines.write_text(lines.read_text().splitlines()[0] + '\n{"verdict": {"engine": "cut sh')
    assert main(["report", str(finished_run), "--junit", str(finished_run / "junit.xml")]) == 2
    one_line_error(capsys, "holds no complete verdict", "run it again")


def test_report_on_a_directory_without_results(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    one_line_error(capsys, "holds neither results.json nor results.jsonl", "--out directory")


def test_report_output_that_cannot_be_written(finished_run, capsys):
    assert main(["report", str(finished_run), "-o", "/proc/report.html"]) == 2
    one_line_error(capsys, "/proc/report.html")


def test_a_reused_out_keeps_nothing_of_the_earlier_run(finished_run, capsys):
    """A run killed with -9 right after it started in the --out of an earlier run: the earlier results, tables and
    report are gone, so nothing reads them as this run's."""
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.run_dir.results import ResultsFile

    assert main(["report", str(finished_run)]) == 0
    assert (finished_run / "results.json").exists() and (finished_run / "report.html").exists()
    ResultsFile(RunDir(finished_run), {"command": "the second run"})  # what a run does first; then the kill
    left = {p.name for p in finished_run.iterdir() if p.is_file()}
    assert not left & {"results.json", "report.html", "verdicts.jsonl", "verdicts.csv", "comparisons.jsonl", "comparisons.csv"}
    assert len((finished_run / "results.jsonl").read_text().splitlines()) == 1  # the new run's header only
    assert main(["report", str(finished_run)]) == 2
    one_line_error(capsys, "holds no complete verdict")


HOLDS_THE_LOCK = """
import fcntl, json, os, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.write(json.dumps({"pid": os.getpid(), "started": "2026-12-02 10:00:00"}))
handle.flush()
print("held", flush=True)
time.sleep(120)
"""


def test_two_runs_into_one_out(tmp_path, capsys):
    """A second run into an --out another run is writing is refused (its results would interleave); the lock goes
    with the process that held it, a kill -9 included."""
    import sys as _sys

    from packcheck.harness.run.out_lock import claim_out
    from packcheck.harness.run_dir import RunDir

    holder = subprocess.Popen([_sys.executable, "-c", HOLDS_THE_LOCK, str(RunDir(tmp_path).lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*RUN, "--out", str(tmp_path)]) == 2
        one_line_error(capsys, f"--out {tmp_path}", f"another packcheck run is writing there (pid {holder.pid}", "another --out")
        assert not (tmp_path / "results.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    lock = claim_out(RunDir(tmp_path))
    assert lock is not None
    lock.close()


# --------------------------------------------------------------------------------------------
# Issue 49: a run killed during start-up, and files no packcheck run writes (items 1 and 5).

def test_a_run_killed_during_start_up_leaves_no_earlier_results_to_report(tmp_path):
    """kill -9 of `packcheck run` before its first verdict (launches starting): the earlier run's results.json was served
    by `packcheck report` with exit 0 as this run's. Claiming --out marks the run as in progress (RunDir.begin)."""
    from packcheck.harness.run.out_lock import claim_out
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.run_dir.results import ResultsFile, ResultsProblem, load_results

    run_dir = RunDir(tmp_path)
    ResultsFile(run_dir, {"command": "the earlier run"}).write()  # an earlier run that finished
    assert load_results(run_dir)["provenance"]["command"] == "the earlier run"
    lock = claim_out(run_dir)  # what `packcheck run` does first; then the kill -9 (the kernel drops the lock)
    if lock is not None:
        lock.close()
    with pytest.raises(ResultsProblem, match="ended before it recorded a verdict \\(killed during start-up\\?\\)"):
        load_results(run_dir)
    ResultsFile(run_dir, {"command": "the next run"}).write()  # a run that finishes ends the mark
    assert load_results(run_dir)["provenance"]["command"] == "the next run" and not run_dir.in_progress.exists()


def minimal_results(**verdict) -> dict:
    from packcheck.harness.run_dir.results import SCHEMA

    cell = {"engine": "e", "engine_spec": "e", "family": "llama", "scenario": "packed_vs_unpacked", "dtype": "float64", "device": "cpu",
            "attention": "auto", "status": "pass", "seconds": 1.0, "max_margin": 0.5}
    return {"schema": SCHEMA, "provenance": {}, "verdicts": [cell | verdict], "rows": []}


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d["verdicts"][0].update(seconds="x"), "verdicts[0].seconds is 'x' (str), expected a number"),
    (lambda d: d["verdicts"][0].update(attention={"a": 1}), "verdicts[0].attention is {'a': 1} (dict), expected a str"),
    (lambda d: d.update(rows=[{k: "x" for k in ("engine", "family", "scenario", "quantity", "metric")} | {"observed": "x", "threshold": 1}]),
     "rows[0].observed is a str"),
    (lambda d: d.update(damage=None), "'damage' is NoneType, expected a list"),
    (lambda d: d["provenance"].update(tolerances=7), "provenance.tolerances is int, expected an object"),
], ids=["seconds", "attention", "observed", "damage", "tolerances"])
def test_report_on_type_confused_fields(tmp_path, capsys, change, expected):
    data = minimal_results()
    change(data)
    (tmp_path / "results.json").write_text(json.dumps(data))
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, str(tmp_path / "results.json"), expected, "rerun `packcheck run`")


def test_report_on_deeply_nested_json(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(minimal_results())[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, "nests its JSON deeper than Python can read", "rerun `packcheck run`")


def test_report_on_a_fifo_in_place_of_results_json(tmp_path, capsys):
    """Reading it blocked `packcheck report` for ever: nothing ever writes into the FIFO."""
    import os

    os.mkfifo(tmp_path / "results.json")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys, "is not a regular file (a FIFO", "remove it")


def test_model_dir_with_a_negative_vocab_size(tmp_path, capsys):
    from packcheck.harness.models import get_family

    (tmp_path / "config.json").write_text(json.dumps(get_family("llama").config() | {"vocab_size": -5}))
    assert main([*RUN, "--model", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    one_line_error(capsys, f"--model {tmp_path}", "vocab_size is -5, expected a positive whole number", "fix the field")


def shrunk_case(path, change) -> str:
    """A shrunk case of packed_vs_unpacked on the tiny llama, as `packcheck shrink` writes one, then `change`d."""
    from packcheck.harness.run.scenario_runner import setting_for
    from packcheck.harness.run_dir.shrunk import SCHEMA
    from packcheck.harness.scenarios import get_scenario
    from packcheck.harness.shrink.record import portable

    size = {"tokens": 3, "documents": 2, "rows": 1, "ranks": 1, "micro_batches": 1, "layers": 1}
    arms = get_scenario("packed_vs_unpacked").build(setting_for("llama", "float64", "cpu"))
    data = {"schema": SCHEMA, "scenario": "packed_vs_unpacked", "engine": "reference", "engine_spec": "reference", "family": "llama",
            "dtype": "float64", "device": "cpu", "attention": "auto", "inputs": {"model": "tiny", "seed": 0},
            "comparison": "logprobs (packed vs unpacked)", "diagnosis_class": "x", "diagnosis": {"before": "", "after": ""},
            "before": size, "after": size, "search": {"seconds": 1.0, "trials": 1, "complete": True}, "replay": "packcheck replay case.json",
            "arms": {name: portable(case) for name, case in arms.items()}}
    change(data)
    path.write_text(json.dumps(data))
    return str(path)


def without(arms: dict, name: str) -> None:
    del arms[name]


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: d["arms"]["packed"]["model"]["config"].update(vocab_size=-5),
     "model.config.vocab_size is -5, expected a positive whole number"),
    (lambda d: d.update(arms={}), "arms is {}"),
    (lambda d: without(d["arms"], "packed"), "arms lacks packed, which packed_vs_unpacked's judge compares"),
], ids=["negative-vocab", "no-arms", "an-arm-missing"])
def test_replay_of_a_broken_case(tmp_path, capsys, change, expected):
    assert main(["replay", shrunk_case(tmp_path / "case.json", change)]) == 2
    one_line_error(capsys, str(tmp_path / "case.json"), expected, "rewrite it with `packcheck shrink`")


def test_results_rewritten_after_their_run_ended_are_refused(tmp_path):
    """Issue 49 item 6: a process the run could not end (an engine's server started through another service, or one
    that killed its warden and then the harness: docs/isolation.md) rewrote results.json to all-pass after a failing
    run, and `packcheck report` served it. The run seals what it wrote at its end; the report checks the seal."""
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.run_dir.results import ResultsFile, ResultsProblem, load_results

    run_dir = RunDir(tmp_path)
    results = ResultsFile(run_dir, {"command": "a failing run"})
    results.add_record({"verdict": minimal_results(status="fail")["verdicts"][0], "rows": []})
    results.write()
    assert [v["status"] for v in load_results(run_dir)["verdicts"]] == ["fail"]
    forged = json.loads(run_dir.results.read_text())
    forged["verdicts"][0]["status"] = "pass"  # what tests/engines/hostile.py's FORGE does, 3 s after the run
    run_dir.results.write_text(json.dumps(forged))
    with pytest.raises(ResultsProblem, match="results.json was changed after its run ended"):
        load_results(run_dir)
