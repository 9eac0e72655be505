"""Reports on a `packcheck run` directory: one self-contained HTML file, a Markdown summary, JUnit XML."""

from packcheck.harness.report.html import render_html, write_html
from packcheck.harness.report.junit import render_junit, write_junit
from packcheck.harness.report.markdown import render_markdown

__all__ = ["render_html", "render_junit", "render_markdown", "write_html", "write_junit"]
