"""`packcheck run --dtype auto`: per engine, the most precise dtype its Capabilities declare
(harness/run/dtype_choice.py), said on the console, in the provenance and in every verdict."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.engines import Capabilities
from packcheck.harness.report import render_markdown
from packcheck.harness.run.dtype_choice import NoDtypeDeclared, choose_dtype


@pytest.mark.parametrize(("declared", "chosen"), [({"float64", "float32", "bfloat16"}, "float64"), ({"bfloat16", "float32"}, "float32"),
                                                  ({"bfloat16"}, "bfloat16")])
def test_auto_takes_the_most_precise_declared_dtype(declared, chosen):
    choice = choose_dtype("e", Capabilities(families=frozenset({"llama"}), dtypes=frozenset(declared)))
    assert choice.dtype == chosen and "Capabilities.dtypes" in choice.why


@pytest.mark.parametrize("declared", [set(), {"float16"}])
def test_auto_without_a_known_dtype_names_the_field(declared):
    with pytest.raises(NoDtypeDeclared, match=r"Capabilities\.dtypes.*frozenset\(\{'float32'\}\)"):
        choose_dtype("e", Capabilities(families=frozenset({"llama"}), dtypes=frozenset(declared)))


def test_run_auto_judges_each_engine_at_its_choice(tmp_path, capsys):
    # the worked example declares float32 only, the reference float64 first; oracle_agreement is cheap and an absolute
    # check, so the run can be green (golden_regression alone is unsupported for the example: no optimizer step)
    code = main(["run", "--engine", "reference", "packcheck.impls.example.minimal_engine:MinimalEngine", "--dtype", "auto",
                 "--family", "llama", "--scenario", "oracle_agreement", "--out", str(tmp_path), "--no-report"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "engine example.minimal: dtype float32 (--dtype auto: the most precise" in err
    data = json.loads((tmp_path / "results.json").read_text())
    assert {v["engine"]: v["dtype"] for v in data["verdicts"]} == {"reference": "float64", "example.minimal": "float32"}
    assert data["provenance"]["dtype"] == "auto" and "float32" in data["provenance"]["dtype_choice"][
        "packcheck.impls.example.minimal_engine:MinimalEngine"]
    assert "--dtype float32" in next(v["reproduce"] for v in data["verdicts"] if v["engine"] == "example.minimal")
    summary = render_markdown(tmp_path)  # a pull request's comment says which dtype each engine was judged at
    assert "dtype auto: `packcheck.impls.example.minimal_engine:MinimalEngine`: float32 (--dtype auto" in summary


def test_run_auto_with_no_declared_dtype_is_a_usage_error(tmp_path, capsys):
    code = main(["run", "--engine", "tests.engines.example_variants:MinimalEngineNoDtype", "--dtype", "auto", "--family", "llama",
                 "--scenario", "token_conservation", "--out", str(tmp_path)])
    assert code == 2
    assert "declares no dtype packcheck runs in Capabilities.dtypes" in capsys.readouterr().err


def test_a_float32_engine_passes_with_no_dtype_flag(tmp_path, capsys):
    # the first run of a float32 adapter, as docs/adapters.md writes it: no --dtype (issue 29, item 1)
    code = main(["run", "--engine", "packcheck.impls.example.minimal_engine:MinimalEngine", "--family", "llama",
                 "--scenario", "token_conservation", "--out", str(tmp_path), "--no-report"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "engine example.minimal: dtype float32 (--dtype auto" in err
    assert "(optional arm packed_dp2 skipped: why is in the report)" in err, "the progress line names the arm it skipped"
    data = json.loads((tmp_path / "results.json").read_text())
    assert [v["dtype"] for v in data["verdicts"]] == ["float32"] and data["provenance"]["dtype"] == "auto"


def test_the_reference_runs_float64_by_default(tmp_path, capsys):
    code = main(["run", "--engine", "reference", "--family", "llama", "--scenario", "golden_regression", "--out", str(tmp_path),
                 "--no-report"])
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "results.json").read_text())
    assert [v["dtype"] for v in data["verdicts"]] == ["float64"]
    assert "--dtype float64" in data["verdicts"][0]["reproduce"]


def test_an_explicit_dtype_the_engine_lacks_is_unsupported_with_a_hint(tmp_path, capsys):
    code = main(["run", "--engine", "packcheck.impls.example.minimal_engine:MinimalEngine", "--family", "llama", "--dtype", "float64",
                 "--scenario", "token_conservation", "--out", str(tmp_path), "--no-report"])
    assert code == 2
    assert "--dtype auto (the default) runs each engine at the most precise dtype" in capsys.readouterr().err


def test_bisect_judges_each_revision_at_its_declared_dtype_by_default():
    import argparse

    from packcheck.harness.bisect.judge import Probe
    from packcheck.harness.bisect.step import parse
    from packcheck.harness.cli import bisect_cmd

    commands = argparse.ArgumentParser().add_subparsers()
    bisect_cmd.add_parser(commands)
    args = commands.choices["bisect"].parse_args(["--repo", ".", "--good", "a", "--bad", "b", "--engine", "m:C"])
    assert args.dtype == "auto" and Probe(engine="m:C", families=("llama",)).dtype == "auto"
    assert parse(["--family", "llama", "--cache", "c", "--engine", "m:C", "--families", "llama"]).dtype == "auto"
