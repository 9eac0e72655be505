"""`packcheck run`: run scenarios against engines, write the run directory (harness/run_dir): results, reports.

Every arm runs in the engine's own processes (harness/launch), so the exit status depends only on
the verdicts and on packcheck's own errors: 0 every supported case passes, 1 a case fails, errs
or hangs, 2 a usage error, an engine that does not start (a spec that names no module or class here,
one line before anything starts: harness/engines/spec_lookup.py; an import or constructor that raises
or hangs, in the engine's processes), an engine with no cell or a run with no verdict (harness/run/untested.py),
every case unsupported, no absolute check passed for an engine and family (harness/run/absolute.py; --relative-only
accepts that), or an interrupted run. Ctrl-C or SIGTERM stops the run at any moment, start-up included: every engine
process is killed, one line says so, and the verdicts so far are kept in results.json and the report.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.cli.interrupt import Interrupted, catch_signals, hold_signals, restore  # stdlib only
from packcheck.harness.run.options import add_arguments
from packcheck.harness.run_dir import RunDir  # stdlib only

if TYPE_CHECKING:
    from packcheck.harness.launch import LaunchFailed


def add_parser(commands) -> None:
    parser = commands.add_parser("run", help="run scenarios against one or more engines")
    add_run_options(parser, required=("engine",))
    parser.add_argument("--save-arms", choices=("failing", "all", "none"), default="failing",
                        help="keep each arm's case and full result under OUT/cases for failing verdicts, all, or none (default: failing)")
    parser.add_argument("--no-report", action="store_true", help="skip report.html, summary.md and junit.xml (default: write them)")
    parser.add_argument("--localise", action="store_true",
                        help="after each failing verdict, re-run its two arms with activation capture and name the first module "
                             "where they part (default: off; later: packcheck localise OUT/ENGINE/FAMILY/SCENARIO)")
    from packcheck.harness.cli.shrink_cmd import add_shrink_options

    add_shrink_options(parser)
    parser.set_defaults(handler=handle)


def add_run_options(parser, required: tuple[str, ...] = (), leave_out: tuple[str, ...] = ()) -> None:
    """The run options (harness/run/options.py, shared with the pytest plugin) and --out (run, calibrate)."""
    add_arguments(parser, required=required, leave_out=leave_out)
    parser.add_argument("--out", default=None, help=f"output directory (default: {DEFAULT_OUT}; one packcheck creates gets a .gitignore, "
                                                   "so that a run in the engine's repository leaves `git status` clean)")


DEFAULT_OUT = "reports/latest"


def output_directory(out: str | None) -> Path:
    """--out as an absolute path (an engine cannot move it), created and writable, or a usage error. Without --out,
    DEFAULT_OUT under the working directory, which is often the engine's repository: git is told to ignore it, as it is
    in any --out this creates (RunDir.create)."""
    run_dir = RunDir(Path(out or DEFAULT_OUT).resolve())
    if run_dir.path.exists() and not run_dir.path.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory; point --out at a directory (it is created if missing)")
    try:
        run_dir.create(default=out is None)
        run_dir.write_probe.write_text("")
        run_dir.write_probe.unlink()
    except OSError as err:
        raise UsageError(f"--out {out}: cannot write there ({err.strerror}); choose a writable directory") from None
    return run_dir.path


def enough_disk(choices, out: Path, save_arms: str) -> None:
    """Say what the run will need under `out`, and refuse it (exit 2) when the disk there cannot hold it (harness/run/disk.py)."""
    from packcheck.harness.models import FAMILIES
    from packcheck.harness.run.disk import LARGE, check_disk, disk_need

    families = choices.families or sorted(FAMILIES)
    need = disk_need(families, choices.scenarios, len(choices.engines), choices.dtype,
                     choices.inputs, save_arms, choices.device, out)
    said = check_disk(out, need)
    if need.bytes > LARGE:
        print(said, file=sys.stderr, flush=True)


def auto_dtypes(engines: list[str], pool, device: str) -> dict:
    """--dtype auto: each engine's choice (harness/run/dtype_choice.py), printed; an engine that does not start is
    left to the run, which reports it; one that declares no dtype is a usage error naming the field."""
    from packcheck.harness.launch import LaunchFailed
    from packcheck.harness.run.dtype_choice import NoDtypeDeclared, choose_dtype

    chosen = {}
    for spec in engines:
        try:
            info = pool.engine_info(spec, device)
        except LaunchFailed:
            continue
        try:
            chosen[spec] = choose_dtype(info.name, info.capabilities)
        except NoDtypeDeclared as err:
            pool.close()
            raise UsageError(str(err)) from None
        print(f"engine {info.name}: dtype {chosen[spec].dtype} ({chosen[spec].why})", file=sys.stderr, flush=True)
    return chosen


def not_started(failed: LaunchFailed) -> str:
    """What became of an engine whose processes never took a case (a LaunchFailed), in a few words."""
    from packcheck.harness.launch import ErrorKind

    if failed.kind is ErrorKind.ENGINE_NOT_FOUND:
        return "does not resolve to an engine"
    return "did not finish importing and building within --timeout" if failed.hung else "did not start"


def record_history(args, results, pool, run_dir: RunDir, interrupted: str | None) -> str:
    """The run's verdicts (an interrupted run's: those concluded) into the history store of --history or
    $PACKCHECK_HISTORY, after its files are written; the line to print ("" when no store is asked for). A store that
    cannot take it is a warning: the run's results and exit status stay as they are (harness/history/record.py)."""
    from packcheck.harness.history.record import record, store_path

    path = store_path(args.history)
    if path is None or not results.records:
        return ""
    from packcheck.harness.history.entry import engine_version
    from packcheck.harness.run.engine_commit import engine_commit_depth

    try:
        commits = results.provenance.get("engine_commit") or {}
        engines = {spec: {"version": engine_version(info.releases) if (info := pool.described(spec)) else "", "commit": commits.get(spec, ""),
                          "depth": engine_commit_depth(spec) if spec in commits else None}
                   for spec in dict.fromkeys(r["verdict"].get("engine_spec", "") for r in results.records)} if pool is not None else {}
    except Exception as err:  # noqa: BLE001 - the engine's identity is recorded where known; the run is recorded anyway
        engines = {}
        print(f"packcheck run: warning: the engines' versions are not recorded in the history: {err}", file=sys.stderr)
    return record(path, results.table(), source="run", directory=str(run_dir.path), engines=engines,
                  note=f"interrupted ({interrupted})" if interrupted else "", device=str(results.provenance.get("device", "cpu")))[1]


def checked_choices(args, **given):
    """The run options of `args`, with `given` in their place, checked (harness/run/choices.py)."""
    from packcheck.harness.run.choices import checked

    return checked(vars(args) | given)


def handle(args) -> int:
    # From the first moment, not just once the verdicts start: a signal while launches start or --dtype auto asks the
    # engines ends the same way as one between verdicts (one line, exit 2, every engine process killed); main() caught
    # them already while the commands were imported (harness/cli/interrupt.py)
    previous = catch_signals()
    try:
        return _handle(args)
    finally:
        restore(previous)


handle.launches = True  # main() forks the zygote of its launches first (harness/launch/zygotes.py, prefork)
handle.catches_signals = True  # main() keeps its start-up handlers in place up to handle()'s own (harness/cli/main.py)


def _handle(args) -> int:
    # here, not at the top: importing harness.launch imports torch, and the parser (`packcheck --version`, `list`) is
    # built without it; main() has imported it already (prefork_zygote), so a signal cannot find these unbound
    from packcheck.harness.launch.process_tree import adopt_orphans
    from packcheck.harness.launch.zygotes import end_all

    pool = None
    try:
        from packcheck.harness.judging.status import VERDICT_STATUSES, Status
        from packcheck.harness.launch import LaunchPool
        from packcheck.harness.launch.usage import Usage
        from packcheck.harness.provenance import provenance
        from packcheck.harness.run.absolute import absolute_summary, unanchored
        from packcheck.harness.run.conclusion import first_error_line
        from packcheck.harness.run.dtype_choice import AUTO
        from packcheck.harness.run.engine_commit import engine_commits
        from packcheck.harness.run.out_lock import claim_out
        from packcheck.harness.run.session import Matrix, exit_status, nothing_judged, run_matrix, where_arms_ran
        from packcheck.harness.run_dir.results import ResultsFile

        choices = checked_choices(args)
        if args.shrink:
            from packcheck.harness.cli.shrink_cmd import checked_budget

            checked_budget("--shrink-budget", args.shrink_budget)
        out = output_directory(args.out)
        run_dir = RunDir(out)
        lock = claim_out(run_dir)  # noqa: F841 - held until this run returns
        adopt_orphans()
        enough_disk(choices, out, args.save_arms)
        usage = Usage(out)
        pool = LaunchPool(run_dir.launches, choices.timeout, usage=usage, protect=(run_dir.path,))
        chosen = auto_dtypes(choices.engines, pool, choices.device) if choices.dtype == AUTO else {}
        commits = engine_commits(choices.engines)
        results = ResultsFile(run_dir, provenance(choices.device, ["packcheck", *args.argv]) | choices.provenance()
                              | ({"engine_commit": commits} if commits else {})
                              | ({"dtype_choice": {spec: f"{c.dtype} ({c.why})" for spec, c in chosen.items()}} if chosen else {}))
        matrix = Matrix(engines=choices.engines, families=choices.families, scenarios=choices.scenarios, dtype=choices.dtype,
                        device=choices.device, attention=choices.attention, save_arms=args.save_arms,
                        dtype_for={spec: c.dtype for spec, c in chosen.items()}, inputs=choices.inputs, noise_floors=choices.noise_floors,
                        localise=args.localise, spot_arms=choices.spot_arms)
    except (Interrupted, KeyboardInterrupt) as stop:
        hold_signals()
        if pool is not None:
            pool.kill()
        end_all()
        print(f"packcheck run: interrupted ({str(stop) or 'SIGINT'}) during start-up, before the first verdict; every engine "
              "process was killed, nothing was judged", file=sys.stderr)
        return 2
    interrupted = None
    try:
        run_matrix(matrix, results, pool)
        if args.shrink:
            from packcheck.harness.cli.shrink_cmd import shrink_failing

            shrink_failing(matrix, pool, out, args.shrink_budget)
        pool.close()
    except (Interrupted, KeyboardInterrupt) as stop:
        hold_signals()
        interrupted = str(stop) or "SIGINT"
        pool.kill()
    finally:
        hold_signals()  # the files below are written whole, whatever arrives meanwhile
        end_all()  # the zygotes, and whatever outlived a warden killed under one (docs/isolation.md)
        resources = usage.to_json()  # as the verdicts left them (the report is not counted)
        results.write(resources=resources, damage=pool.damage if pool is not None else ())
        if not args.no_report and results.verdicts:
            from packcheck.harness.report import write_run_reports

            write_run_reports(run_dir)
            print(f"report:  {run_dir.report_html}", file=sys.stderr)
        history = record_history(args, results, pool, run_dir, interrupted)
    verdicts = matrix.verdicts
    counts = {status: sum(v.status == status for v in verdicts) for status in VERDICT_STATUSES}
    print(f"{len(verdicts)} verdicts: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f"\nresults: {run_dir.results}", file=sys.stderr)
    print(usage.summary(resources), file=sys.stderr)
    if history:
        print(history, file=sys.stderr)
    if where_arms_ran(verdicts):
        print(where_arms_ran(verdicts), file=sys.stderr)
    for notice in pool.notices:  # the machine allowed no mount namespace: said once, the run's checks stand in
        print(f"packcheck run: warning: {notice}", file=sys.stderr)
    for damage in pool.damage:  # a file of packcheck, a golden, a cached checkpoint or a saved arm an engine changed: never green
        print(f"packcheck run: warning: {damage}", file=sys.stderr)
    if interrupted:
        print(f"packcheck run: interrupted ({interrupted}) after {len(verdicts)} verdicts; every engine process was killed, "
              "the verdicts so far are in the results and the report", file=sys.stderr)
        return 2
    # an engine whose spec named a module and class, but importing, checking or building it failed; one that declared no
    # family this run knows: each named, and never green on nothing
    errors = [f"--engine {spec} {not_started(failed)}: {first_error_line(failed.text)}" for spec, failed in matrix.not_started.items()]
    if errors := errors + nothing_judged(matrix):
        for line in errors:
            print(f"packcheck run: error: {line}", file=sys.stderr)
        return 2
    if verdicts and counts[Status.UNSUPPORTED] == len(verdicts):
        reason, times = Counter(v.reason for v in verdicts).most_common(1)[0]
        undeclared = choices.dtype != AUTO and any(choices.dtype not in pool.engine_info(spec, choices.device).capabilities.dtypes
                                                   for spec in {v.engine_spec for v in verdicts})  # described before its verdicts: no launch
        hint = ("; --dtype auto (the default) runs each engine at the most precise dtype its Capabilities.dtypes declare"
                if undeclared else "")
        print(f"packcheck run: error: every case was unsupported by the engine: nothing was tested. Most common reason "
              f"({times} of {len(verdicts)}): {reason}{hint}", file=sys.stderr)
        return 2
    cells = [(v.engine, v.family, v.scenario, v.status) for v in verdicts]
    if said := absolute_summary(cells, choices.relative_only):
        print(f"packcheck run: {said}", file=sys.stderr)
    status = max(exit_status(verdicts), 1 if pool.damage else 0)  # an engine that changed what it may not: not green
    return 2 if status == 0 and unanchored(cells) and not choices.relative_only else status  # as "nothing was tested"
