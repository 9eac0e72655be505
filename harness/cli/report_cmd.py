"""`packcheck report DIR [--baseline DIR] -o FILE.html [--markdown FILE.md]`."""

from __future__ import annotations

from pathlib import Path


def add_parser(commands) -> None:
    parser = commands.add_parser("report", help="render a run's results as one self-contained HTML file")
    parser.add_argument("run_dir", help="the --out directory of a `packcheck run`")
    parser.add_argument("--baseline", default=None, help="another run directory to compare against (default: none)")
    parser.add_argument("-o", "--output", default=None, help="HTML file to write (default: RUN_DIR/report.html)")
    parser.add_argument("--markdown", default=None, help="also write a Markdown summary for a PR comment (default: no)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from harness.report import render_markdown, write_html

    output = Path(args.output) if args.output else Path(args.run_dir) / "report.html"
    write_html(Path(args.run_dir), output, baseline_dir=Path(args.baseline) if args.baseline else None)
    print(output)
    if args.markdown:
        Path(args.markdown).write_text(render_markdown(Path(args.run_dir)))
        print(args.markdown)
    return 0
