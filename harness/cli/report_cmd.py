"""`packcheck report DIR [--baseline DIR [--match-engine OLD=NEW ...]] [-o FILE.html] [--markdown FILE.md] [--junit FILE.xml]`."""

from __future__ import annotations

import sys
from pathlib import Path


def add_parser(commands) -> None:
    parser = commands.add_parser("report", help="render a run's results as one self-contained HTML file")
    parser.add_argument("run_dir", help="the --out directory of a `packcheck run`")
    parser.add_argument("--baseline", default=None, help="another run directory to compare against, in the HTML and the Markdown (default: none)")
    parser.add_argument("--match-engine", action="append", default=None, metavar="OLD=NEW",
                        help="with --baseline: compare the baseline's engine OLD with this run's engine NEW (a renamed engine); "
                             "repeat for several (default: engines match by name)")
    parser.add_argument("-o", "--output", default=None, help="HTML file to write (default: RUN_DIR/report.html)")
    parser.add_argument("--markdown", default=None, help="also write a Markdown summary for a PR comment (default: no)")
    parser.add_argument("--junit", default=None, help="also write JUnit XML, one testcase per verdict, for CI test reports (default: no)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from packcheck.harness.report import render_markdown, write_html, write_junit
    from packcheck.harness.files import write_atomically
    from packcheck.harness.run_dir import RunDir

    run_dir = Path(args.run_dir)
    output = Path(args.output) if args.output else RunDir(run_dir).report_html
    from packcheck.harness.cli.errors import UsageError
    from packcheck.harness.report.baseline import parse_renames

    baseline = Path(args.baseline) if args.baseline else None
    if args.match_engine and baseline is None:
        raise UsageError("--match-engine matches engines against a baseline: give --baseline DIR too")
    rename = parse_renames(args.match_engine)
    write_html(run_dir, output, baseline_dir=baseline, rename=rename)
    print(output)
    if not RunDir(run_dir).results.exists():
        from packcheck.harness.report.load import load_run
        print(f"packcheck report: {load_run(run_dir).unfinished}", file=sys.stderr)
    if args.markdown:
        write_atomically(Path(args.markdown), render_markdown(run_dir, baseline_dir=baseline, rename=rename))
        print(args.markdown)
    if args.junit:
        print(write_junit(run_dir, args.junit))
    return 0
