"""The HTML and Markdown reports, on a small hand-written results.json (schema packcheck.results/1).

The fixture holds one verdict of each status, grad rows over two layers, non-finite numbers
stored as strings, and engine text that tries to inject markup.
"""

from __future__ import annotations

import json
import math
import re

import pytest

from packcheck.harness.report import render_html, render_junit, render_markdown, write_html
from packcheck.harness.report.load import format_margin, load_run

PAYLOAD = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
BREAKOUT = '" onmouseover="alert(2)'  # tries to leave a title="..." attribute
MUTANT_REPRODUCE = ("packcheck run --engine mutant.x --family llama --scenario packed_vs_unpacked "
                    "--dtype float64 --device cpu")


def _row(engine, family, scenario, arms, quantity, item, metric, observed, threshold, where=""):
    margin = observed / threshold if math.isfinite(observed) else observed
    passed = observed <= threshold

    def enc(x):
        return x if math.isfinite(x) else str(x)

    return {"engine": engine, "family": family, "scenario": scenario, "dtype": "float64", "device": "cpu",
            "arms": arms, "quantity": quantity, "item": item, "metric": metric, "observed": enc(observed),
            "threshold": threshold, "where": where, "passed": passed, "margin": enc(margin)}


def _verdict(engine, family, scenario, status, rows, diagnosis="", detail=""):
    worst = max(rows, key=lambda r: float(r["margin"]), default=None)
    return {"engine": engine, "family": family, "scenario": scenario, "dtype": "float64", "device": "cpu",
            "status": status, "diagnosis": diagnosis, "detail": detail, "seconds": 0.05,
            "max_margin": None if worst is None else worst["margin"], "worst": worst,
            "comparisons": len(rows), "failing": sum(not r["passed"] for r in rows),
            "reproduce": f"packcheck run --engine {engine} --family {family} --scenario {scenario} --dtype float64 --device cpu",
            "message": ""}


def _write_run(directory, mutant_status="fail"):
    ok = [_row("reference", "llama", "packed_vs_unpacked", "packed vs unpacked", "logprobs", "", "max_abs", 2.6e-15, 1e-10)]
    if mutant_status == "fail":
        def row(*fields, where=""):
            return _row("mutant.x", "llama", "packed_vs_unpacked", "packed vs unpacked", *fields, where=where)

        bad = [
            row("logprobs", "", "max_abs", 3.4, 1e-10, where="sample 6 token 1, document 3 of 4 in packed row 0"),
            row("grad", "model.embed_tokens.weight", "rel_l2", 1e-14, 1e-9),
            row("grad", "model.layers.0.mlp.up_proj.weight", "rel_l2", 2e-13, 1e-9),
            row("grad", f"model.layers.1.{PAYLOAD}.weight", "rel_l2", 0.42, 1e-9),
            row("grad", "model.layers.1.mlp.down_proj.weight", "rel_l2", math.nan, 1e-9),
            row("loss", "", "rel", math.inf, 1e-12),
        ]
        mutant = _verdict("mutant.x", "llama", "packed_vs_unpacked", "fail", bad,
                          diagnosis="documents see their predecessors in the row: cross-document attention",
                          detail=f"Traceback (most recent call last):\n  File \"engine.py\", line 3\nValueError: {PAYLOAD}")
    else:
        bad = [_row("mutant.x", "llama", "packed_vs_unpacked", "packed vs unpacked", "logprobs", "", "max_abs", 3e-15, 1e-10)]
        mutant = _verdict("mutant.x", "llama", "packed_vs_unpacked", "pass", bad)
    verdicts = [
        _verdict("reference", "llama", "packed_vs_unpacked", "pass", ok),
        mutant,
        _verdict("mutant.x", "qwen3", "packed_vs_unpacked", "unsupported", [], diagnosis="engine declares no qwen3 support"),
        _verdict("mutant.x", "llama", "golden_regression", "error", [], diagnosis=f"the engine crashed {BREAKOUT}",
                 detail="Traceback (most recent call last):\nRuntimeError: boom | pipe"),
    ]
    data = {
        "schema": "packcheck.results/1",
        "provenance": {"packcheck": "0.1.0", "torch": "2.13.0+cpu", "device": "cpu", "git_commit": "abc1234",
                       "command": "packcheck run --engine all", "time": "2026-01-01T00:00:00+00:00"},
        "verdicts": verdicts,
        "rows": ok + bad,
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "results.json").write_text(json.dumps(data))
    return directory


@pytest.fixture
def run_dir(tmp_path):
    return _write_run(tmp_path / "run")


@pytest.fixture
def baseline_dir(tmp_path):
    return _write_run(tmp_path / "baseline", mutant_status="pass")


def test_load_maps_non_finite_strings_back_to_floats(run_dir):
    run = load_run(run_dir)
    rows = run.rows.set_index("item")
    assert math.isnan(rows.loc["model.layers.1.mlp.down_proj.weight", "observed"])
    assert run.rows[run.rows["quantity"] == "loss"]["margin"].iloc[0] == math.inf
    mutant = run.verdicts[(run.verdicts["engine"] == "mutant.x") & (run.verdicts["status"] == "fail")].iloc[0]
    assert mutant["max_margin"] == math.inf and mutant["worst"]["margin"] == math.inf
    assert math.isnan(run.verdicts[run.verdicts["status"] == "error"]["max_margin"].iloc[0])


def test_margins_print_in_scientific_notation():
    assert [format_margin(x) for x in (2.6e-5, 3.4e10, math.inf, math.nan, 0.0, None)] == \
        ["2.6e-05", "3.4e+10", "inf", "nan", "0", ""]


def test_html_has_matrix_diagnosis_and_reproduce(run_dir):
    html = render_html(run_dir)
    assert 'class="matrix"' in html and ">packed_<wbr>vs_<wbr>unpacked</th>" in html and ">golden_<wbr>regression</th>" in html
    for cls in ("cell pass", "cell fail", "cell unsupported", "cell error"):
        assert cls in html
    assert "2.6e-05" in html  # the passing cell's margin
    assert "documents see their predecessors in the row" in html
    assert MUTANT_REPRODUCE in html
    assert "1 pass" in html and "1 fail" in html and "1 unsupported" in html and "1 error" in html


def test_failing_verdict_shows_gradient_error_by_layer(run_dir):
    html = render_html(run_dir)
    assert "Gradient error by layer" in html
    chart = html[html.index("Gradient error by layer"):html.index("</svg>")]
    positions = [chart.index(f'class="label">{label}<') for label in ("embeddings", "layer 0", "layer 1")]
    assert positions == sorted(positions)  # in depth order
    assert "First out of tolerance: <b>layer 1</b>" in html


def test_engine_text_is_escaped_never_raw(run_dir):
    html = render_html(run_dir)
    assert PAYLOAD not in html and html.count("<script") == 1, "the only script is the report's own"
    assert "script-src 'sha256-" in html, "and the Content-Security-Policy allows only it, by hash"
    assert f"model.layers.1.{ESCAPED}.weight" in html  # a parameter name
    assert f"ValueError: {ESCAPED}" in html  # a traceback in a verdict's detail
    assert 'onmouseover="alert' not in html
    assert "&#34; onmouseover=&#34;alert(2)" in html


def test_html_is_self_contained(run_dir, tmp_path):
    out = write_html(run_dir, tmp_path / "out" / "report.html")
    html = out.read_text()
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and " src=" not in html and "@import" not in html


def test_baseline_section_lists_status_change(run_dir, baseline_dir):
    html = render_html(run_dir, baseline_dir=baseline_dir)
    assert 'id="baseline"' in html
    section = html[html.index('id="baseline"'):html.index('id="details"')]
    assert "Status changes (1)" in section
    assert "mutant.x / llama / packed_vs_unpacked / float64 / cpu" in section
    assert '<span class="badge pass">PASS</span></td><td><span class="badge fail">FAIL</span>' in section
    assert 'id="baseline"' not in render_html(run_dir)


def test_markdown_has_table_and_failing_verdicts(run_dir):
    md = render_markdown(run_dir)
    assert "| engine | family | packed_vs_unpacked | golden_regression |" in md
    assert "| mutant.x | llama | FAIL inf | ERROR |" in md
    assert "| mutant.x | qwen3 | UNSUPPORTED | - |" in md
    assert "PASS 2.6e-05" in md
    assert "**FAIL** packed_vs_unpacked [mutant.x / llama / float64 / cpu]" in md
    assert "documents see their predecessors in the row" in md
    assert f"`{MUTANT_REPRODUCE}`" in md
    assert "**ERROR** golden_regression" in md and "UNSUPPORTED" in md
    assert "<script" not in md


def test_every_link_lands_on_an_anchor(run_dir, baseline_dir):
    html = render_html(run_dir, baseline_dir=baseline_dir)
    targets = set(re.findall(r'href="#([^"]+)"', html))
    assert targets and targets <= set(re.findall(r'id="([^"]+)"', html))


def test_key_fields_that_vary_label_the_rows(run_dir):
    path = run_dir / "results.json"
    data = json.loads(path.read_text())
    data["verdicts"].append(dict(data["verdicts"][0], dtype="float32"))
    path.write_text(json.dumps(data))
    assert "llama · float32" in render_html(run_dir)
    assert "| engine | family | dtype | packed_vs_unpacked | golden_regression |" in render_markdown(run_dir)


def test_junit_has_one_testcase_per_verdict(run_dir, tmp_path):
    import xml.etree.ElementTree as ET

    from packcheck.harness.cli.main import main

    assert main(["report", str(run_dir), "-o", str(tmp_path / "r.html"), "--junit", str(tmp_path / "junit.xml")]) == 0
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "4", "failures": "1", "errors": "1", "skipped": "1"}
    assert {p.get("name"): p.get("value") for p in suite.find("properties")}["git_commit"] == "abc1234"
    cases = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    assert len(cases) == 4
    verdicts = {(v["engine"], v["family"], v["scenario"]): v for v in json.loads((run_dir / "results.json").read_text())["verdicts"]}

    passed = cases["packcheck.reference.llama", "packed_vs_unpacked[float64-cpu-auto]"]
    assert list(passed) == [] and float(passed.get("time")) == 0.05
    (failure,) = cases["packcheck.mutant.x.llama", "packed_vs_unpacked[float64-cpu-auto]"]
    assert failure.tag == "failure"
    verdict = verdicts["mutant.x", "llama", "packed_vs_unpacked"]
    assert failure.get("message") == failure.text == (verdict["message"] or verdict["diagnosis"])
    (skipped,) = cases["packcheck.mutant.x.qwen3", "packed_vs_unpacked[float64-cpu-auto]"]
    assert skipped.tag == "skipped" and "no qwen3 support" in skipped.get("message")
    (error,) = cases["packcheck.mutant.x.llama", "golden_regression[float64-cpu-auto]"]
    assert error.tag == "error" and BREAKOUT in error.get("message")  # engine text survives as text: the parser gives it back


def test_junit_and_markdown_treat_a_newer_failing_status_as_an_error(run_dir):
    import xml.etree.ElementTree as ET

    path = run_dir / "results.json"
    data = json.loads(path.read_text())
    data["verdicts"].append(dict(data["verdicts"][0], scenario="vlm_collective_symmetry", status="hang", diagnosis="rank 1 waits"))
    path.write_text(json.dumps(data))
    suite = ET.fromstring(render_junit(run_dir)).find("testsuite")
    assert suite.get("errors") == "2"
    (hang,) = [c for c in suite.findall("testcase") if c.get("name").startswith("vlm_collective_symmetry")]
    assert [(e.tag, e.get("type")) for e in hang] == [("error", "hang")]
    assert "**HANG** vlm_collective_symmetry" in render_markdown(run_dir)


def test_markdown_baseline_names_the_engines_commit_and_skips_unsupported_cells_absent_from_one_run(run_dir, baseline_dir):
    data = json.loads((baseline_dir / "results.json").read_text())
    data["verdicts"] = [v for v in data["verdicts"] if v["status"] != "unsupported"]  # not run in the baseline: tested nothing either way
    data["provenance"]["engine_commit"] = {"my_engine:MyEngine": "e1e1e1e1"}
    (baseline_dir / "results.json").write_text(json.dumps(data))
    summary = render_markdown(run_dir, baseline_dir=baseline_dir)
    section = summary[summary.index("### Against baseline"):]
    assert "at engine commit `e1e1e1e1` (`my_engine:MyEngine`)" in section and "packcheck commit `abc1234`" in section, section
    assert "ABSENT" not in section and "**Status changes (1)**" in section, section


def test_the_report_says_what_each_scenario_checks_and_where_to_read_more(run_dir):
    from html import unescape

    from packcheck.harness.scenarios import SCENARIOS

    page = render_html(run_dir)
    section = unescape(page[page.index('id="scenarios"'):])
    for name in ("packed_vs_unpacked", "golden_regression"):
        assert SCENARIOS[name].invariant in section and f"packcheck explain {name}" in section, name


def test_the_term_that_bound_a_row_shows_under_its_allowed_error_escaped(tmp_path):
    """A threshold the rounding term set (harness/compare/rounding_bound.py) says so where the report shows it."""
    term = f"bf16 spacing at |logp| = 11.9: 6.45% {PAYLOAD}"
    row = _row("reference.fast", "llama", "rl_step0_ratio", "packed vs harness", "dloss_dlogprobs", "policy token weight", "max_rel",
               0.2, 0.0715) | {"bound": {"field": "dloss_dlogprobs", "source": "rounding", "floor": None, "term": term, "table": 0.01368}}
    verdict = _verdict("reference.fast", "llama", "rl_step0_ratio", "fail", [row])
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "results.json").write_text(json.dumps({"schema": "packcheck.results/1", "provenance": {}, "verdicts": [verdict], "rows": [row]}))
    assert load_run(directory).rows["allowed_by"].iloc[0] == f"by {term}; the table alone: 0.0137"
    html = render_html(directory)
    assert "by bf16 spacing at |logp| = 11.9: 6.45% " + ESCAPED + "; the table alone: 0.0137" in html
    assert PAYLOAD not in html
