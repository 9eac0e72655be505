"""The reports a run directory holds, written by both front doors (`packcheck run --out DIR`, the pytest plugin's
`--out DIR`) and again by `packcheck localise` once a verdict is located: report.html, summary.md (the Markdown for a
pull request) and junit.xml (a testcase per verdict, for CI's test report)."""

from __future__ import annotations

from packcheck.harness.files import write_atomically
from packcheck.harness.report.html import write_html
from packcheck.harness.report.junit import write_junit
from packcheck.harness.report.markdown import render_markdown
from packcheck.harness.run_dir import RunDir


def write_run_reports(run_dir: RunDir) -> list[str]:
    """The three reports of the run in `run_dir`, from its results; their file names, for a line that says what was written."""
    write_html(run_dir.path, run_dir.report_html)
    write_atomically(run_dir.summary_md, render_markdown(run_dir.path))
    write_junit(run_dir.path, run_dir.junit_xml)
    return [path.name for path in (run_dir.report_html, run_dir.summary_md, run_dir.junit_xml)]
