"""`packcheck run --localise` and `packcheck localise RUN_DIR/VERDICT`: the console line, localisations.jsonl, the
report's "where it parts" section (the first divergent module marked, engine text escaped), the Markdown summary and
the JUnit message. One real run of a mutant that fails, and one of the reference that passes (nothing to locate)."""

from __future__ import annotations

import json

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.compare.divergence import Divergence, PointError, Where
from packcheck.harness.report import render_html, render_junit, render_markdown
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import add_localisation, read_localisations

pytestmark = pytest.mark.xdist_group("localise-cli")  # run_dir, shared by every test: one worker runs it once

ENGINE = "mutant.cross-doc-attention"
FIRST = "first divergent module: model.layers.0.self_attn"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("localised")
    assert main(["run", "--engine", ENGINE, "--family", "llama", "--scenario", "packed_vs_unpacked", "--out", str(out), "--localise"]) == 1
    return out


def test_run_localise_writes_the_localisation_and_says_it(run_dir, capfd):
    (divergence,) = read_localisations(RunDir(run_dir)).values()
    assert divergence.where is Where.FORWARD and divergence.first_point.module == "model.layers.0.self_attn"
    lines = (run_dir / "localisations.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["verdict"]["engine"] == ENGINE


def test_the_report_markdown_and_junit_name_the_first_divergent_module(run_dir):
    html = render_html(run_dir)
    assert "Where it parts" in html and FIRST in html
    assert '<tr class="first">' in html and "&#9658; model.layers.0.self_attn.o_proj (input)" in html
    assert f"where it parts: {FIRST}" in render_markdown(run_dir)
    assert f"where it parts: {FIRST}" in render_junit(run_dir)


def test_localise_command_locates_a_recorded_verdict(run_dir, capsys):
    assert main(["localise", str(run_dir / "cases" / ENGINE / "llama" / "packed_vs_unpacked")]) == 0
    assert FIRST in capsys.readouterr().out
    assert len((run_dir / "localisations.jsonl").read_text().splitlines()) == 2  # appended; the latest is the one read


def test_localise_command_refuses_a_path_without_a_failing_verdict(run_dir, capsys):
    assert main(["localise", str(run_dir / ENGINE / "llama" / "mask_alignment")]) == 2
    assert "no failing verdict there" in capsys.readouterr().err


def test_engine_text_in_the_trail_is_escaped(run_dir, tmp_path):
    """Module names are the engine's words: they reach the page as text."""
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("results.jsonl", "results.json"):
        (copy / name).write_bytes((run_dir / name).read_bytes())
    (record,) = [json.loads(line)["verdict"] for line in (run_dir / "results.jsonl").read_text().splitlines()[1:]]
    hostile = "<script>alert(1)</script>"
    point = PointError(hostile, hostile + "mod", 1.0, 0, 1)
    add_localisation(RunDir(copy), record, Divergence(
        where=Where.FORWARD, arm=hostile, against="unpacked", threshold=1e-10, forward=(point,), first=0, tokens=3))
    html = render_html(copy)
    assert hostile not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert hostile not in render_markdown(copy)
