"""A float32 run speaks float32 (issue 45, item 9): each dtype has its own clean and bug bands (harness/compare/bands.py),
derived from the tolerance policy and the margins measured in docs/, which the report, the Markdown summary and
`packcheck explain` print for the dtypes they show; a clean float32 pass is not shaded as close to its tolerance; a
cell judged by a calibrated table shows its error as a multiple of the reference's noise floor; and the report says
where the tolerances come from, with a link."""

from __future__ import annotations

import json
import re
from pathlib import Path

from packcheck.harness.cli.main import main
from packcheck.harness.compare.bands import BANDS, BUG_BFLOAT16, CROSS_DOC_LOGPROB_ERROR
from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR, NOISE_FLOORS, TOLERANCES
from packcheck.harness.report import render_html, render_markdown

ROOT = Path(__file__).resolve().parents[1]
FLOOR = NOISE_FLOORS["float32"]["grad"]


def _verdict(scenario: str, dtype: str, margin: float, calibrated: bool) -> tuple[dict, dict]:
    keys = {"engine": "my_engine", "family": "llama", "scenario": scenario, "dtype": dtype, "device": "cpu", "attention": "auto"}
    threshold = TOLERANCES[dtype].grad
    row = keys | {"arm": "packed", "against": "unpacked", "arms": "packed vs unpacked", "quantity": "grad", "item": "model.norm.weight",
                  "metric": "rel_l2", "observed": margin * threshold, "threshold": threshold, "where": "", "passed": margin <= 1,
                  "margin": margin}
    if calibrated:
        row |= {"bound": {"field": "grad", "source": "calibrated_floor", "floor": FLOOR}, "floor_ratio": margin * threshold / FLOOR}
    verdict = keys | {"status": "pass" if margin <= 1 else "fail", "diagnosis": "", "detail": "", "seconds": 0.1, "max_margin": margin,
                      "worst": row, "comparisons": 1, "failing": int(margin > 1), "reproduce": "packcheck run ...", "message": ""}
    return verdict, row


def _run(directory: Path, cells) -> Path:
    pairs = [_verdict(*cell) for cell in cells]
    directory.mkdir()
    (directory / "results.json").write_text(json.dumps({"schema": "packcheck.results/1", "provenance": {},
                                                        "verdicts": [v for v, _ in pairs], "rows": [r for _, r in pairs]}))
    return directory


def _cells(html: str) -> dict[str, str]:
    """scenario -> the matrix cell's markup, for a run of one engine and family."""
    matrix = html[html.index('<table class="matrix">'):]
    scenarios = re.findall(r'<th class="scenario">(.*?)</th>', matrix[:matrix.index("</thead>")])
    cells = re.findall(r'<td class="cell [^"]*">.*?</td>', matrix[matrix.index("<tbody>"):matrix.index("</tbody>")], re.S)
    return {name.replace("<wbr>", ""): cell for name, cell in zip(scenarios, cells)}


def test_a_clean_float32_run_is_read_against_float32s_bands(tmp_path):
    run = _run(tmp_path / "run", [("packed_vs_unpacked", "float32", 0.12, True), ("microbatch_invariance", "float32", 0.6, True)])
    html = render_html(run)
    cells = _cells(html)
    clean, above = cells["packed_vs_unpacked"], cells["microbatch_invariance"]
    assert clean.startswith('<td class="cell pass">'), "0.12 of a float32 tolerance is half the reference's own noise: clean"
    assert '<span class="fl">0.48x floor</span>' in clean, clean
    assert above.startswith('<td class="cell near">') and "2.4x floor" in above, "above the noise floor: shaded"
    assert BANDS["float32"].sentence() in html.replace("&#39;", "'")
    assert "float64 engine" not in html, "a float32 run is not read against float64's bands"

    summary = render_markdown(run)
    assert "| my_engine | llama | PASS 1.2e-01 (0.48x floor) | PASS 6.0e-01 (2.4x floor) |" in summary, summary
    assert BANDS["float32"].sentence() in summary and "float64 engine" not in summary


def test_a_float64_pass_far_above_the_references_margin_is_shaded_and_has_no_floor(tmp_path):
    run = _run(tmp_path / "run", [("packed_vs_unpacked", "float64", 1e-4, False), ("microbatch_invariance", "float64", 0.05, False)])
    html = render_html(run)
    cells = _cells(html)
    assert cells["packed_vs_unpacked"].startswith('<td class="cell pass">') and cells["microbatch_invariance"].startswith('<td class="cell near">')
    assert 'class="fl"' not in html and "x floor" not in render_markdown(run)
    assert BANDS["float64"].sentence() in html.replace("&#39;", "'") and "float32 engine" not in html


def test_the_report_says_where_the_tolerances_come_from_with_a_link(tmp_path):
    html = render_html(_run(tmp_path / "run", [("packed_vs_unpacked", "float32", 0.12, True)]))
    line = re.search(r"<li[^>]*>Where the allowed errors come from: .*?</li>", html, re.S).group(0)
    assert "harness/compare/tolerances.py" in line and "noise floor" in line, line
    href = re.search(r'<a href="([^"]+)">docs/margins.md</a>', line).group(1)
    assert href == (ROOT / "docs" / "margins.md").as_uri(), "a checkout links its own derivation"


def test_explain_prints_the_bands_of_the_dtype_it_explains(capsys):
    assert main(["explain", "packed_vs_unpacked", "--dtype", "bfloat16"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "a clean bfloat16 engine reads 0.25 or less" in out and "a bug 1.1 and up" in out, out
    assert "float64 reads" not in out and "clean float64 engine" not in out


def test_the_bands_follow_from_the_policy_and_the_measurements_they_cite():
    assert BANDS["float32"].clean == BANDS["bfloat16"].clean == 1 / CALIBRATION_FACTOR
    gpu = (ROOT / "docs" / "gpu.md").read_text()
    # float32: the weakest signal of the 2026-11-30 H200 table, at the float32 log-prob tolerance of then (1e-4)
    assert "| document_isolation | cross-doc-attention | 1.6e+04 | 16 |" in gpu
    assert 1.6e4 * 1e-4 == CROSS_DOC_LOGPROB_ERROR and BANDS["float32"].bug == CROSS_DOC_LOGPROB_ERROR / TOLERANCES["float32"].logprobs
    # bfloat16: at today's table, the weakest one measured
    measured = re.search(r"\| moe-router-counts-local \(qwen3_moe\) \| (.*?) \|", gpu).group(1)
    assert min(float(x) for x in re.findall(r"\b\d+(?:\.\d+)?\b", measured)) == BUG_BFLOAT16
    margins = (ROOT / "docs" / "margins.md").read_text()
    assert "1.2e-04" in margins and "2.2e+09" in margins, "the float64 figures the bands cite"
