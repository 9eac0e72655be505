"""The history store (harness/history): a run round-trips through it and pandas reads it; an old run directory is imported
once; a store that cannot take a run is a warning; the page and the Markdown find the steps of a series of runs, say what
changed in the environment at each, escape what the store holds, and `--fail-on-step` fails only on a regression."""

from __future__ import annotations

import json
import math
import sqlite3

import pandas as pd
import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.history import SCHEMA, Store, StoreProblem
from packcheck.harness.history.record import record

CELL = {"engine": "toy", "family": "llama", "scenario": "packed_vs_unpacked", "dtype": "float32", "device": "cpu", "attention": "auto"}


def results(time: str, margins: dict[str, float], transformers: str = "4.46.1", engine: str = "toy", known: str = "") -> dict:
    """A run as results.json holds it: one verdict per scenario with its margin (inf and NaN as the file writes them)."""
    verdicts, rows = [], []
    for scenario, margin in margins.items():
        cell = CELL | {"engine": engine, "scenario": scenario}
        text = margin if math.isfinite(margin) else str(margin)
        status = "fail" if margin > 1 else "pass"
        verdicts.append(cell | {"engine_spec": engine, "status": status, "known_finding": known if status == "fail" else "",
                                "max_margin": text, "worst": {"quantity": "grad", "item": "w", "metric": "rel_l2", "observed": text, "threshold": 1.0},
                                "comparisons": 2, "failing": int(status == "fail"), "seconds": 0.5})
        rows += [cell | {"quantity": "grad", "metric": "rel_l2", "observed": text, "threshold": 1.0, "margin": text, "passed": margin <= 1},
                 cell | {"quantity": "logprobs", "metric": "max_abs", "observed": 0.0, "threshold": 1.0, "margin": 0.0, "passed": True}]
    provenance = {"packcheck": "0.1.0", "torch": "2.13.0+cpu", "transformers": transformers, "python": "3.11.7", "device": "cpu",
                  "device_name": "x86_64", "cpu": {"model": "EPYC", "aten_capability": "avx2"}, "git_commit": "abc", "command": "packcheck run",
                  "time": time}
    return {"schema": "packcheck.results/1", "provenance": provenance, "verdicts": verdicts, "rows": rows}


def test_a_run_round_trips_through_the_store(tmp_path):
    store = tmp_path / "history.sqlite"
    data = results("2026-12-01T10:00:00+00:00", {"packed_vs_unpacked": 0.25, "golden_regression": math.inf, "mask_alignment": math.nan})
    assert record(store, data, source="run", engines={"toy": {"version": "transformers 4.46.1", "commit": "f00"}}, measure=False)[0]
    history = Store(store).read()
    run = history.runs.iloc[0]
    assert (run["source"], run["time"], run["transformers"], run["cpu_capability"], run["packcheck_commit"]) == (
        "run", "2026-12-01T10:00:00+00:00", "4.46.1", "avx2", "abc")
    assert json.loads(run["provenance"]) == data["provenance"]
    verdicts = history.verdicts
    assert list(verdicts["scenario"]) == ["packed_vs_unpacked", "golden_regression", "mask_alignment"]
    assert verdicts["max_margin"][0] == 0.25 and verdicts["max_margin"][1] == math.inf and math.isnan(verdicts["max_margin"][2])
    assert list(verdicts["status"]) == ["pass", "fail", "pass"] and set(verdicts["engine_version"]) == {"transformers 4.46.1"}
    assert set(verdicts["engine_commit"]) == {"f00"} and list(verdicts["worst_quantity"]) == ["grad"] * 3
    quantities = history.quantities.set_index(["scenario", "quantity"])["max_margin"]
    assert quantities["packed_vs_unpacked", "grad"] == 0.25 and quantities["packed_vs_unpacked", "logprobs"] == 0.0
    with sqlite3.connect(store) as connection:  # plain pandas, no packcheck: the tables are ordinary SQL
        assert pd.read_sql("SELECT value FROM meta WHERE key = 'schema'", connection)["value"][0] == SCHEMA
        assert len(pd.read_sql("SELECT * FROM verdicts JOIN runs ON runs.id = verdicts.run_id", connection)) == 3
    added, said = record(store, data, source="run", measure=False)
    assert not added and "holds this run already" in said and len(Store(store).read().runs) == 1


def test_a_store_that_cannot_take_a_run_is_a_warning(tmp_path):
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as connection:
        connection.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.execute("INSERT INTO meta VALUES ('schema', 'someone.else/3')")
    (tmp_path / "text.sqlite").write_text("not a database at all " * 100)
    for path, why in ((foreign, "has schema 'someone.else/3'"), (tmp_path / "text.sqlite", "not a packcheck history store"), (tmp_path, "not a file")):
        added, said = record(path, results("2026-12-01T10:00:00+00:00", {"packed_vs_unpacked": 0.25}), source="run", measure=False)
        assert not added and said.startswith("warning: not recorded") and why in said, said
    with pytest.raises(StoreProblem, match="does not exist"):
        Store(tmp_path / "none.sqlite").read()


def test_an_old_run_directory_is_imported_once(tmp_path, capsys):
    """A run directory written before the store (and before `attention`, `known_finding` and the seal existed), and a run
    that never finished (results.jsonl only), are imported; a second import adds nothing."""
    old = tmp_path / "old-run"
    old.mkdir()
    data = results("2026-11-20T09:00:00+00:00", {"packed_vs_unpacked": 0.5, "microbatch_invariance": 3e5})
    for verdict in data["verdicts"]:
        del verdict["attention"], verdict["known_finding"]
    (old / "results.json").write_text(json.dumps(data))
    cut = tmp_path / "cut-run"
    cut.mkdir()
    later = results("2026-11-21T09:00:00+00:00", {"packed_vs_unpacked": 0.4})
    (cut / "results.jsonl").write_text(json.dumps({"schema": "packcheck.results/1", "provenance": later["provenance"]}) + "\n"
                                       + json.dumps({"verdict": later["verdicts"][0], "rows": later["rows"]}) + "\n" + '{"verdict": {"eng')
    store = tmp_path / "history.sqlite"
    assert main(["history", "--store", str(store), "--import", str(old), str(cut), "--out", str(tmp_path / "page")]) == 0
    history = Store(store).read()
    assert list(history.runs["source"]) == ["import", "import"] and list(history.runs["note"]) == ["", "unfinished"]
    assert list(history.runs["directory"]) == [str(old), str(cut)] and set(history.runs["torch"]) == {"2.13.0+cpu"}
    assert list(history.verdicts["max_margin"]) == [0.5, 3e5, 0.4] and list(history.verdicts["attention"]) == ["", "", "auto"]
    assert main(["history", "--store", str(store), "--import", str(old), "--out", str(tmp_path / "page")]) == 0
    assert "the store holds this run already" in capsys.readouterr().err and len(Store(store).read().runs) == 2
    assert main(["history", "--store", str(store), "--import", str(tmp_path / "page"), "--out", str(tmp_path / "page")]) == 2


def releases_store(tmp_path):
    """Six releases of transformers, each run twice (the spread measured from the repeats): microbatch_invariance drops at
    4.46.1, packed_vs_unpacked at 4.53.1; an engine whose name is markup."""
    store = tmp_path / "history.sqlite"
    series = (("4.45.2", 5.4e4, 2.3e4), ("4.46.1", 8e3, 2.3e4), ("4.53.0", 8e3, 2.3e4), ("4.53.1", 0.011, 0.014), ("5.0.0", 0.012, 0.013),
              ("5.24.0", 0.012, 0.014))
    engine = "<script>alert(1)</script>"
    for day, (release, microbatch, packed) in enumerate(series, start=1):
        for repeat, wobble in enumerate((1.0, 1.05)):
            data = results(f"2026-12-0{day}T1{repeat}:00:00+00:00", {"microbatch_invariance": microbatch * wobble, "packed_vs_unpacked": packed},
                           transformers=release, engine=engine, known="H5" if release < "4.53.1" else "")
            assert record(store, data, source="pytest", engines={engine: {"version": f"transformers {release}"}}, measure=False)[0]
    return store


def test_the_page_finds_the_steps_and_says_what_changed(tmp_path):
    store = releases_store(tmp_path)
    assert main(["history", "--store", str(store), "--out", str(tmp_path / "page"), "--markdown", str(tmp_path / "history.md"),
                 "--fail-on-step"]) == 0, "both steps are down: no regression"
    page = (tmp_path / "page" / "history.html").read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page, "store text is escaped; the page has no script"
    markdown = (tmp_path / "history.md").read_text()
    steps = [line for line in markdown.splitlines() if line.startswith("| S")]
    assert len(steps) == 3, markdown
    assert "microbatch_invariance" in steps[0] and "| 4.45.2 -> 4.46.1 |" in steps[0]
    assert "transformers 4.45.2 -> 4.46.1" in steps[0] and "down" in steps[0]
    assert "microbatch_invariance" in steps[1] and "transformers 4.53.0 -> 4.53.1" in steps[1]
    assert "packed_vs_unpacked" in steps[2] and "transformers 4.53.0 -> 4.53.1" in steps[2]
    assert "known finding -> pass" in markdown, "the status changes are listed"


def commits_store(tmp_path, last: float):
    """Twelve commits of an engine, one run each, packed_vs_unpacked's margin 0.01 with a 10 % wobble, then `last`."""
    store = tmp_path / "history.sqlite"
    margins = [0.010, 0.011, 0.0095, 0.0102, 0.0108, 0.0099, 0.0104, 0.0091, 0.0112, 0.0100, 0.0097, last]
    for i, margin in enumerate(margins):
        data = results(f"2026-12-01T{i:02d}:00:00+00:00", {"packed_vs_unpacked": margin})
        assert record(store, data, source="run", engines={"toy": {"commit": f"{i:02d}" + "0" * 38}}, measure=False)[0]
    return store


def test_fail_on_step_fails_on_a_regression_to_the_tolerance_line(tmp_path, capsys):
    up = commits_store(tmp_path / "up", last=0.9)  # the newest commit: up 90x, near the tolerance line
    assert main(["history", "--store", str(up), "--out", str(tmp_path / "page"), "--fail-on-step"]) == 1
    assert "regression: toy / llama / packed_vs_unpacked / float32 / cpu / auto: error/tolerance 0.0101 -> 0.9 (x88.7)" in capsys.readouterr().err
    assert main(["history", "--store", str(up), "--out", str(tmp_path / "page"), "--fail-on-step", "--fail-level", "2"]) == 0
    assert main(["history", "--store", str(up), "--out", str(tmp_path / "page")]) == 0, "without --fail-on-step: drawn, exit 0"
    far = commits_store(tmp_path / "far", last=0.05)  # up 5x, far below the line: on the page, not a failure
    assert main(["history", "--store", str(far), "--out", str(tmp_path / "page"), "--fail-on-step", "--markdown", str(tmp_path / "far.md")]) == 0
    assert "**x4.93 up**" in (tmp_path / "far.md").read_text()
    flat = commits_store(tmp_path / "flat", last=0.0105)
    assert main(["history", "--store", str(flat), "--out", str(tmp_path / "page"), "--fail-on-step"]) == 0
    assert "0 steps (x: commit)" in capsys.readouterr().err
