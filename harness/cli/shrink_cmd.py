"""`packcheck shrink RUN_DIR[/ENGINE/FAMILY/SCENARIO] [--budget SECONDS] [--out FILE]`: a failing verdict made as
small as it stays failing (harness/shrink), written as a standalone case that `packcheck replay CASE` runs again.

Exit status: 1 the verdict still fails and its smallest case is written (the failure, as `packcheck run`'s 1);
2 nothing to shrink (a passing, unsupported, erroring or hanging verdict, a golden scenario, a failure that no longer
reproduces), or a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.judging.status import Status
from packcheck.harness.run.options import add_option

EXAMPLES = """\
examples:
  # the one failing verdict of a run, or one named by its engine, family and scenario
  packcheck shrink reports/latest
  packcheck shrink reports/latest/mutant.cross-doc-attention/llama/packed_vs_unpacked --budget 300
  # then run the case it wrote again (the command it prints), or against the fixed engine
  packcheck replay reports/latest/shrunk/mutant.cross-doc-attention/llama/packed_vs_unpacked.json --engine reference
"""


def add_parser(commands) -> None:
    import argparse

    from packcheck.harness.shrink.budget import DEFAULT_BUDGET

    parser = commands.add_parser("shrink", help="shrink a failing verdict to the smallest case that still fails the same way",
                                 epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("verdict", metavar="RUN_DIR[/ENGINE/FAMILY/SCENARIO]",
                        help="a run directory (its one failing verdict), or a verdict in it; RUN_DIR/cases/... (its saved arms) too")
    add_budget(parser, "--budget", DEFAULT_BUDGET)
    parser.add_argument("--out", default=None, help="the case file to write (default: RUN_DIR/shrunk/ENGINE/FAMILY/SCENARIO.json)")
    add_option(parser, "timeout")
    parser.set_defaults(handler=handle)


def add_budget(parser, flag: str, default: float) -> None:
    parser.add_argument(flag, type=float, default=default, metavar="SECONDS",
                        help=f"seconds a verdict's shrinking may take; the smallest case found by then is kept (default: {default:g})")


def add_shrink_options(parser) -> None:
    """`packcheck run --shrink [--shrink-budget SECONDS]`."""
    from packcheck.harness.shrink.budget import DEFAULT_BUDGET

    parser.add_argument("--shrink", action="store_true",
                        help="after the run, shrink each failing verdict to the smallest case that still fails the same way, written under "
                             "OUT/shrunk (default: no; `packcheck shrink` does one later)")
    add_budget(parser, "--shrink-budget", DEFAULT_BUDGET)


def checked_budget(flag: str, seconds: float) -> float:
    if not 0 < seconds < float("inf"):
        raise UsageError(f"{flag} {seconds:g}: give the seconds a shrink may take, a positive number (default: 120)")
    return seconds


def shrink_failing(matrix, pool, out: Path, budget: float) -> None:
    """`packcheck run --shrink`: each failing verdict of the run shrunk in its warm launches, from the verdict just judged."""
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.scenarios import get_scenario
    from packcheck.harness.shrink.subject import Subject

    budget = checked_budget("--shrink-budget", budget)
    failing = [v for v in matrix.verdicts if v.status is Status.FAIL]
    if failing:
        print(f"shrinking {len(failing)} failing verdict(s), at most {budget:g}s each (--shrink-budget)", file=sys.stderr, flush=True)
    for verdict in failing:
        subject = Subject(engine=verdict.engine_spec or verdict.engine, engine_name=verdict.engine, scenario=get_scenario(verdict.scenario),
                          family=verdict.family, dtype=verdict.dtype, device=verdict.device, attention=verdict.attention,
                          inputs=matrix.inputs, noise_floors=matrix.noise_floors)
        shrink_verdict(subject, pool, budget, RunDir(out).shrunk_case(verdict.engine, verdict.family, verdict.scenario), first=verdict,
                       trials=False)


def handle(args) -> int:
    import tempfile

    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.run.choices import checked_timeout
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.shrink.locate import find_verdict, subject_of

    budget = checked_budget("--budget", args.budget)
    checked_timeout(args.timeout)
    run_dir, verdict, provenance = find_verdict(args.verdict)
    subject = subject_of(verdict, provenance)
    out = Path(args.out) if args.out else RunDir(run_dir).shrunk_case(subject.engine_name, subject.family, subject.scenario.name)
    with tempfile.TemporaryDirectory(prefix="packcheck-shrink-") as launches, LaunchPool(Path(launches), args.timeout) as pool:
        return shrink_verdict(subject, pool, budget, out, status=verdict["status"])


handle.launches = True  # main() forks the zygote of its launches first (harness/launch/zygotes.py, prefork)


def shrink_verdict(subject, pool, budget: float, out: Path, status: str = Status.FAIL, first=None, trials: bool = True) -> int:
    """Shrink one verdict (its `status` in the run, or `first`, the Verdict itself) and print what became of it: the
    sizes, the diagnosis and the one command that replays the case written to `out`. 1: shrunk; 2: nothing to shrink."""
    from packcheck.harness.data.size import before_after
    from packcheck.harness.shrink.driver import NothingToShrink, refusal, shrink
    from packcheck.harness.shrink.record import write_shrunk

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if (why := refusal(subject, status)) is not None:
        say(f"packcheck shrink: {subject.describe()}: {why}")
        return 2
    try:
        shrunk = shrink(subject, pool, budget, say if trials else (lambda line: None), first=first)
    except NothingToShrink as why:
        say(f"packcheck shrink: {subject.describe()}: {why}")
        return 2
    path = write_shrunk(shrunk, out)
    from packcheck.harness.run_dir.shrunk import read_json, summary_of

    ended = "" if shrunk.complete else ", the budget ran out: the smallest case found"
    say(f"shrunk {subject.describe()} in {shrunk.seconds:.1f}s ({shrunk.trials} trials{ended}): {before_after(shrunk.before, shrunk.after)}")
    say(f"  still fails: {shrunk.target}, diagnosed by {shrunk.target.diagnosis_class}")
    say(f"  likely cause: {shrunk.verdict.diagnosis}")
    say(f"  case: {path}")
    print(f"replay: {summary_of(path, read_json(path)).replay}", flush=True)  # the command the case holds
    return 1
