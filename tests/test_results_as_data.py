"""A run's results as data: `load_run` (the public API) gives the verdicts and comparisons as
DataFrames; standard tools read the flat tables beside results.json as they are
(`pd.read_json(..., lines=True)`, `pd.read_csv`, strict JSON parsers); and the Markdown summary
with a baseline shows what changed, as the HTML does."""

from __future__ import annotations

import json
import math
import shutil

import pandas as pd
import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.report import load_run, render_markdown
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.tables import COMPARISON_TABLE, VERDICT_TABLE

pytestmark = pytest.mark.xdist_group("results-as-data")  # run_dir, shared by every test: one worker runs it once

MUTANT = "mutant.boundary-label"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A real run: the reference passes mask_alignment, a mutant fails it (with an infinite margin: a count)."""
    out = tmp_path_factory.mktemp("data-run")
    assert main(["run", "--engine", "reference", MUTANT, "--family", "llama", "--scenario", "mask_alignment", "--out", str(out),
                 "--no-report"]) == 1
    return out


def test_load_run_gives_verdicts_and_comparisons_frames(run_dir):
    run = load_run(run_dir)
    assert list(run.verdicts["engine"]) == ["reference", MUTANT] and list(run.verdicts["status"]) == ["pass", "fail"]
    assert run.comparisons is run.rows and len(run.comparisons) == sum(run.verdicts["comparisons"])
    assert run.comparisons["margin"].dtype == float and run.verdicts["max_margin"].dtype == float
    assert run.provenance["command"].startswith("packcheck run")


def test_standard_tools_read_the_flat_tables(run_dir):
    run = load_run(run_dir)
    for name, columns, frame in (("verdicts", VERDICT_TABLE, run.verdicts), ("comparisons", COMPARISON_TABLE, run.comparisons)):
        lines = pd.read_json(run_dir / f"{name}.jsonl", lines=True)
        table = pd.read_csv(run_dir / f"{name}.csv")
        assert list(lines.columns) == list(table.columns) == list(columns)
        assert len(lines) == len(table) == len(frame)
        for record in (run_dir / f"{name}.jsonl").read_text().splitlines():  # strict JSON: no NaN or Infinity literals
            json.loads(record, parse_constant=lambda token: pytest.fail(f"{name}.jsonl holds {token}"))
    table = pd.read_csv(run_dir / "comparisons.csv")
    assert table["margin"].dtype == float and math.inf in set(table["margin"]), "inf reads back as a float"
    assert list(table["margin"]) == list(run.comparisons["margin"])
    verdicts = pd.read_csv(run_dir / "verdicts.csv")
    assert list(verdicts["max_margin"]) == list(run.verdicts["max_margin"])
    failing = verdicts[verdicts["status"] == "fail"].iloc[0]
    worst = run.verdicts["worst"].iloc[1]
    assert (failing["worst_quantity"], failing["worst_metric"]) == (worst["quantity"], worst["metric"])
    with pytest.raises(ValueError):  # why the flat tables exist: results.json is one object, not a table
        pd.read_json(run_dir / "results.json")


def test_markdown_with_a_baseline_shows_status_changes_and_moved_margins(run_dir, tmp_path):
    baseline = tmp_path / "baseline"
    shutil.copytree(run_dir, baseline)
    data = json.loads((baseline / "results.json").read_text())
    mutant = data["verdicts"][1]
    mutant["status"], mutant["max_margin"] = "pass", 2e-6  # the mutant passed in the baseline, far below its tolerance
    (baseline / "results.json").write_text(json.dumps(data))
    RunDir(baseline).seal.unlink()  # a baseline edited by hand, not written by a run: unsealed, as an older packcheck's run

    md = render_markdown(run_dir, baseline_dir=baseline)
    section = md[md.index("### Against baseline"):md.index("### Failing")]
    assert f"Baseline `{baseline}`" in section
    assert "**Status changes (1)**" in section
    assert f"| {MUTANT} / llama / mask_alignment / float64 / cpu / auto | PASS | FAIL | 2.0e-06 | inf |" in section
    assert "**Worst error/tolerance moved 10x or more (1, largest increase first)**" in section and "| up (worse) |" in section
    assert "### Against baseline" not in render_markdown(run_dir)

    assert main(["report", str(run_dir), "-o", str(tmp_path / "r.html"), "--baseline", str(baseline),
                 "--markdown", str(tmp_path / "pr.md")]) == 0
    assert (tmp_path / "pr.md").read_text() == md


def test_every_output_says_what_error_over_tolerance_is(run_dir):
    """"margin" read backwards to newcomers: outputs name it error/tolerance, and define it where they print it."""
    from packcheck.harness.report import render_html
    from packcheck.harness.run.session import verdict_line
    from packcheck.harness.run.verdict import Verdict
    from packcheck.harness.compare import Arms, Comparison

    md = render_markdown(run_dir)
    assert "worst error/tolerance, the observed error of the verdict's worst comparison divided by the allowed error (< 1 passes" in md
    assert "worst error/tolerance inf:" in md and "margin" not in md.replace("docs/margins.md", "")  # a file name, not a label
    page = render_html(run_dir)
    assert "Each cell prints its worst error / tolerance: the observed error of its worst comparison divided by the allowed error" in page
    assert ">margin<" not in page and "max margin" not in page.lower()
    bad = Comparison(arms=Arms("packed", "unpacked"), quantity="loss", item="", metric="rel", observed=3e-3, threshold=1e-10)
    assert "loss (packed vs unpacked): rel 0.003 > allowed 1e-10 (error/tolerance 3e+07)" in bad.headline()
    line = verdict_line(Verdict(engine="e", family="llama", scenario="s", dtype="float64", device="cpu", status="fail", comparisons=(bad,)))
    assert line.startswith("FAIL (worst error/tolerance 3e+07)")
