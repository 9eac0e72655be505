"""The Markdown summary reads as plain text in a CI log (issue 45, item 11): a diagnosis's "a > b" stays "a > b", not
"a &gt; b", while engine text that Markdown would take for HTML (a tag, an entity) is still escaped."""

from __future__ import annotations

import json

from packcheck.harness.report import render_markdown
from tests.test_report import _write_run


def test_comparison_signs_stay_as_typed_and_markup_stays_text(tmp_path):
    run = _write_run(tmp_path / "run")
    path = run / "results.json"
    data = json.loads(path.read_text())
    diagnosis = "grad 0.42 > allowed 1e-9 & loss < 1 nat: <script>alert(1)</script> &lt;b&gt; <b>"
    for verdict in data["verdicts"]:
        if verdict["status"] == "fail":
            verdict["diagnosis"] = diagnosis
    path.write_text(json.dumps(data))

    summary = render_markdown(run)
    line = next(line for line in summary.splitlines() if line.startswith("- **FAIL**"))
    assert "grad 0.42 > allowed 1e-9 & loss < 1 nat: " in line, line
    assert "&gt;" not in summary.replace("&amp;lt;b&amp;gt;", ""), summary
    assert "<script" not in summary and "<b>" not in summary, line
    assert "&lt;script>alert(1)&lt;/script>" in line and "&amp;lt;b&amp;gt;" in line and "&lt;b>" in line, line
