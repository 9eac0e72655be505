"""The report at a laptop's width, in headless Chromium: at 1280 px (issue 45, item 11) the widest summary matrix a run
makes (every scenario a column, RL and VLM ones included; long engine names; float32 cells with their noise-floor
line) fits the window with no horizontal scroll, and engine and scenario names wrap only after '.', '-', '_' or ':', never
inside a word. The page's own script measures the layout after rendering (report.js) and records
it on <body>; the control, a window too narrow for the matrix, proves the measurement reads it."""

from __future__ import annotations

import json
import os
import re

import pytest

from packcheck.harness.models import FAMILIES
from packcheck.harness.report import write_html
from packcheck.harness.report.browser import find_chromium, load
from packcheck.harness.scenarios import SCENARIOS

needs_chromium = pytest.mark.skipif(
    find_chromium() is None and not os.environ.get("PACKCHECK_REQUIRE_BROWSER"),
    reason="Chromium is not installed (apt-get install chromium); .ci/run installs it and requires this test",
)
ENGINES = ("reference", "verl_fsdp.trainer-normalisers", "ringmaster_cp.preshifted-labels", "tests.engines.injection:InjectsMarkup")


def _widest_run(directory, dtype="float64"):
    """A results.json with every engine x family x scenario: alternate passes (2.6e-05) and fails (3.4e+10); in float32
    each comparison carries its noise-floor ratio, a third line in its cell."""
    verdicts, rows = [], []
    for i, engine in enumerate(ENGINES):
        for family in FAMILIES:
            for j, scenario in enumerate(SCENARIOS):
                margin = 3.4e10 if (i + j) % 4 == 1 else 2.6e-5
                keys = {"engine": engine, "family": family, "scenario": scenario, "dtype": dtype, "device": "cpu", "attention": "auto"}
                row = keys | {"arm": "a", "against": "b", "arms": "a vs b", "quantity": "loss", "item": "", "metric": "rel",
                              "observed": margin * 1e-10, "threshold": 1e-10, "where": "", "passed": margin < 1, "margin": margin}
                if dtype != "float64":
                    row |= {"floor_ratio": margin * 4}
                rows.append(row)
                verdicts.append(keys | {"status": "fail" if margin > 1 else "pass", "diagnosis": "", "detail": "", "seconds": 0.1,
                                        "max_margin": margin, "worst": row, "comparisons": 1, "failing": int(margin > 1),
                                        "reproduce": "packcheck run ...", "message": ""})
    directory.mkdir()
    (directory / "results.json").write_text(json.dumps({"schema": "packcheck.results/1", "provenance": {}, "verdicts": verdicts,
                                                        "rows": rows}))
    return write_html(directory, directory / "report.html")


def _facts(dom: str) -> tuple[int, int]:
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-script="ran"' in body, "report.js did not finish"
    return int(re.search(r'data-matrix-overflow-px="(\d+)"', body).group(1)), int(re.search(r'data-names-split="(\d+)"', body).group(1))


@needs_chromium
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_widest_matrix_fits_1280_px_and_names_wrap_between_words(tmp_path, dtype):
    report = _widest_run(tmp_path / "run", dtype)
    overflow, split = _facts(load(report, size="1280,1000").dom)
    assert overflow == 0, f"the matrix runs {overflow} px past a 1280 px window: its right columns need a horizontal scroll"
    assert split == 0, f"{split} engine or scenario names wrapped inside a word"
    narrow, _ = _facts(load(report, size="900,1000").dom)
    assert narrow > 0, "the control: in a 900 px window the same matrix does not fit, and the measurement says so"


def test_names_break_only_at_separators_and_stay_escaped(tmp_path):
    html = _widest_run(tmp_path / "run").read_text()
    assert "<th class=\"engine\" rowspan=\"5\">tests.<wbr>engines.<wbr>injection:<wbr>InjectsMarkup</th>" in html
    assert "<th class=\"scenario\">rl_<wbr>loss_<wbr>aggregation</th>" in html
    assert "ringmaster_<wbr>cp.<wbr>preshifted-<wbr>labels" in html

    from packcheck.harness.report.html import _breakable
    assert str(_breakable("<script>x.y</script>")) == "&lt;script&gt;x.<wbr>y&lt;/script&gt;"
