"""Reports on a `packcheck run` directory: one self-contained HTML file, and a Markdown summary."""

from harness.report.html import render_html, write_html
from harness.report.markdown import render_markdown

__all__ = ["render_html", "render_markdown", "write_html"]
