"""`packcheck` exit codes and outputs: 0 pass, 1 a failing case, 2 usage errors."""

from __future__ import annotations

import json
import os
import sys

from packcheck.harness.cli.main import main


def test_run_reference_passes_and_writes_results(tmp_path, capsys):
    code = main(["run", "--engine", "reference", "--family", "llama", "--scenario", "packed_vs_unpacked", "mask_alignment",
                 "--out", str(tmp_path), "--no-report", "--history", str(tmp_path / "history.sqlite")])
    assert code == 0
    data = json.loads((tmp_path / "results.json").read_text())
    from packcheck.harness.history import Store  # the run recorded itself in the history store it was given

    history = Store(tmp_path / "history.sqlite").read()
    assert list(history.runs["source"]) == ["run"] and history.runs["command"][0] == data["provenance"]["command"]
    assert list(history.verdicts["max_margin"]) == [v["max_margin"] for v in data["verdicts"]]
    assert data["schema"] == "packcheck.results/1"
    assert {v["status"] for v in data["verdicts"]} == {"pass"}
    assert data["provenance"]["torch"] and data["provenance"]["command"].startswith("packcheck run")
    assert all(r["margin"] < 1 for r in data["rows"])
    err = capsys.readouterr().err
    assert "[2/2] reference llama mask_alignment ... PASS" in err and "| elapsed " in err and ", ETA 0s" in err, err


def test_run_mutant_fails_with_the_reproduce_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PACKCHECK_HISTORY", str(tmp_path))  # a folder, no store: a warning, the run's outcome as it was
    code = main(["run", "--engine", "mutant.ga-mean-of-means", "--family", "qwen3", "--scenario", "microbatch_invariance",
                 "--out", str(tmp_path), "--no-report"])
    assert code == 1
    err = capsys.readouterr().err
    assert f"warning: not recorded in the history store {tmp_path}: StoreProblem" in err
    assert "likely cause" in err and f"reproduce: {os.path.dirname(sys.executable)}/packcheck run --engine mutant.ga-mean-of-means" in err


def test_engine_patterns_expand(tmp_path):
    code = main(["run", "--engine", "mutant.pad-in-*", "--family", "llama", "--scenario", "token_conservation", "--out", str(tmp_path), "--no-report"])
    data = json.loads((tmp_path / "results.json").read_text())
    assert code == 1 and [v["engine"] for v in data["verdicts"]] == ["mutant.pad-in-loss"]


def test_usage_errors_exit_2_with_suggestions(tmp_path, capsys):
    assert main(["run", "--engine", "reference", "--scenario", "packed_vs_unpaked", "--out", str(tmp_path)]) == 2
    assert "did you mean packed_vs_unpacked" in capsys.readouterr().err
    assert main(["run", "--engine", "refrence", "--out", str(tmp_path)]) == 2
    assert main(["run", "--engine", "reference", "--family", "lama", "--out", str(tmp_path)]) == 2
    assert main(["run", "--engine", "reference", "--dtype", "float16", "--out", str(tmp_path)]) == 2


def test_list_commands(capsys):
    for what in ("scenarios", "engines", "families", "mutants"):
        assert main(["list", what]) == 0
    out = capsys.readouterr().out
    assert "microbatch_invariance" in out and "qwen3" in out and "mutant.tail-pack-dropped" in out
