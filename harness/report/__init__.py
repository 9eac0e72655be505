"""Reports on a `packcheck run` directory: one self-contained HTML file, a Markdown summary, JUnit XML;
and `load_run`, the run as pandas tables (the public API for results as data)."""

from packcheck.harness.report.html import render_html, write_html
from packcheck.harness.report.junit import render_junit, write_junit
from packcheck.harness.report.load import Run, load_run
from packcheck.harness.report.markdown import render_markdown

__all__ = ["Run", "load_run", "render_html", "render_junit", "render_markdown", "write_html", "write_junit"]
