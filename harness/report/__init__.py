"""Reports on a `packcheck run` directory: one self-contained HTML file, a Markdown summary, JUnit XML (the three a run
directory holds: `write_run_reports`); and `load_run`, the run as pandas tables (the public API for results as data).
A run directory is read through harness/run_dir only: the report needs neither the runner nor the shrinker."""

from packcheck.harness.report.html import render_html, write_html
from packcheck.harness.report.junit import render_junit, write_junit
from packcheck.harness.report.load import Run, load_run
from packcheck.harness.report.markdown import render_markdown
from packcheck.harness.report.run_reports import write_run_reports

__all__ = ["Run", "load_run", "render_html", "render_junit", "render_markdown", "write_html", "write_junit", "write_run_reports"]
