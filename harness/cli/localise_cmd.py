"""`packcheck localise RUN_DIR/VERDICT`: where the two arms of a failing verdict first part, after the run.

VERDICT is the verdict's ENGINE/FAMILY/SCENARIO (the folder its arms are saved in under RUN_DIR/cases/ names it the
same way); every failing verdict of that cell (each dtype and device the run had) is located: its worst failing
comparison between two arms is rebuilt from the scenario's plan and the run's inputs and re-run with capture on
(harness/run/localise.py). The result is appended to the run's localisations (harness/run_dir/localisations.py) and
the run's reports, where it has them, are written again with its "where it parts" section.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from packcheck.harness.errors import InputError
from packcheck.harness.run.options import add_option


class NoSuchVerdict(InputError):
    """The path names no failing verdict of a run: the message says what it found and what to give."""


def add_parser(commands) -> None:
    parser = commands.add_parser("localise", help="locate the first module where a failing verdict's two arms part")
    parser.add_argument("verdict", help="RUN_DIR/ENGINE/FAMILY/SCENARIO (or RUN_DIR/cases/ENGINE/FAMILY/SCENARIO): a failing verdict of a run")
    add_option(parser, "timeout")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.report import write_run_reports
    from packcheck.harness.run.localise_from_files import failing_verdicts, localise_recorded
    from packcheck.harness.run_dir.localisations import add_localisation

    run_dir, verdicts = failing_verdicts(Path(args.verdict))
    if not verdicts:
        raise NoSuchVerdict(f"{args.verdict}: the run in {run_dir.path} has no failing verdict there; give RUN_DIR/ENGINE/FAMILY/SCENARIO "
                            "of a verdict whose status is fail")
    with tempfile.TemporaryDirectory(prefix="packcheck-localise-") as work, LaunchPool(Path(work), args.timeout) as pool:
        for record in verdicts:
            divergence = localise_recorded(run_dir, record, pool)
            add_localisation(run_dir, record, divergence)
            print(f"{record['scenario']} [{record['engine']} / {record['family']} / {record['dtype']} / {record['device']}]: "
                  f"{divergence.sentence()} ({divergence.seconds:.1f} s)")
    if run_dir.report_html.exists():
        write_run_reports(run_dir)
        print(run_dir.report_html, file=sys.stderr)
    return 0


handle.launches = True  # main() forks the zygote of its launches first (harness/launch/zygotes.py, prefork)
