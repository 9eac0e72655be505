"""`packcheck history --store PATH [--import RUN_DIR ...] [--out DIR] [--markdown FILE] [--x LABEL] [--fail-on-step]`.

Imports old run directories into the store (if asked), then draws it: DIR/history.html (the margins of every cell over
the runs, the steps found and what changed at each) and, with --markdown, a summary for a CI comment. Exit 0; 1 with
--fail-on-step when a cell's last step is a regression to --fail-level of the tolerance or more (harness/history/gate.py);
2 on a usage error (no store, a directory that holds no run).
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = "reports/history"


def add_parser(commands) -> None:
    from packcheck.harness.history.gate import FAIL_LEVEL
    from packcheck.harness.history.series import LABELS

    parser = commands.add_parser("history", help="draw the margins of every run kept in a history store, with the steps found")
    parser.add_argument("--store", default=None, metavar="PATH",
                        help="the history store (SQLite) runs record into with --history (default: $PACKCHECK_HISTORY)")
    parser.add_argument("--import", dest="imports", nargs="+", action="extend", default=[], metavar="RUN_DIR",
                        help="record these run directories (packcheck run --out, the pytest plugin's --out) into the store first "
                             "(default: none)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"where history.html goes (default: {DEFAULT_OUT})")
    parser.add_argument("--markdown", default=None, metavar="FILE", help="also write a Markdown summary for a CI comment (default: no)")
    parser.add_argument("--x", default="auto", choices=LABELS, metavar="LABEL",
                        help="what one x is: release (the engine's version), commit (the engine's), time (each run), or an "
                             "environment column (transformers, torch, gpu, ...); auto: the engine's commit where runs differ in "
                             "it, else its version, else the first environment column that differs (default: auto)")
    parser.add_argument("--fail-on-step", action="store_true",
                        help="exit 1 when a cell's last step is up (a factor 2 or more) to --fail-level of the tolerance or "
                             "more (default: off, exit 0)")
    parser.add_argument("--fail-level", type=float, default=FAIL_LEVEL, metavar="MARGIN",
                        help=f"with --fail-on-step: the error / tolerance a step must reach to fail (default: {FAIL_LEVEL})")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from packcheck.harness.cli.errors import UsageError
    from packcheck.harness.files import write_atomically
    from packcheck.harness.history import Store
    from packcheck.harness.history.gate import regressions
    from packcheck.harness.history.importer import import_run
    from packcheck.harness.history.markdown import render_markdown
    from packcheck.harness.history.page import render_page, write_page
    from packcheck.harness.history.record import store_path
    from packcheck.harness.history.series import series_of

    path = store_path(args.store)
    if path is None:
        raise UsageError("--store PATH: name the history store (or set PACKCHECK_HISTORY)")
    store = Store(path)
    for directory in args.imports:
        print(import_run(store, directory), file=sys.stderr)
    history = store.read()
    label, found = series_of(history, args.x)
    failing = regressions(found, args.fail_level) if args.fail_on_step else None
    page = write_page(Path(args.out) / "history.html", render_page(history, label, found, failing, args.fail_level))
    print(page)
    if args.markdown:
        write_atomically(Path(args.markdown), render_markdown(history, label, found, failing, args.fail_level))
        print(args.markdown)
    steps = sum(len(s.fit.steps) for s in found if s.fit)
    print(f"packcheck history: {len(history.runs)} runs, {len(found)} cells, {steps} steps (x: {label})", file=sys.stderr)
    if failing:
        for series, step in failing:
            print(f"packcheck history: regression: {series.name}: error/tolerance {step.before:.3g} -> {step.after:.3g} "
                  f"(x{step.factor:.3g})", file=sys.stderr)
        return 1
    return 0
