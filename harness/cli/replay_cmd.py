"""`packcheck replay CASE [--engine SPEC]`: run a shrunk case again (harness/shrink/replay.py) and print its verdict; a
guard case (packcheck.guard, docs/guard.md) is rerun by the guard.

Exit status: 0 the case passes (the engine given with --engine, or the bug fixed), 1 it still fails, errs or hangs,
2 the file cannot be read, or the engine (--engine's, or the case's own) names nothing here or does not start: one line,
as `packcheck run` says it, never a verdict that reads as "still fails". The case's own engine is replayed from the
folder it recorded (harness/shrink/replay.py), so it replays from any directory.
"""

from __future__ import annotations

import shlex
import sys

from packcheck.harness.run.options import add_option


def add_parser(commands) -> None:
    parser = commands.add_parser("replay", help="run a shrunk case (`packcheck shrink`'s file) again and print its verdict")
    parser.add_argument("case", help="the JSON file `packcheck shrink` or `packcheck run --shrink` wrote")
    parser.add_argument("--engine", default=None, help="run it against this engine instead (default: the engine it was shrunk on)")
    add_option(parser, "timeout")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    import contextlib
    import tempfile
    from pathlib import Path

    from packcheck.harness.cli.run_cmd import not_started
    from packcheck.harness.engines import engine_names
    from packcheck.harness.launch import LaunchFailed, LaunchPool
    from packcheck.harness.run.choices import BadOption, checked_engines, checked_timeout, engine_problem
    from packcheck.harness.run.conclusion import first_error_line
    from packcheck.harness.run.reproduce import engine_folder, replay_command
    from packcheck.harness.shrink.record import read_shrunk
    from packcheck.harness.run_dir.shrunk import ShrunkProblem
    from packcheck.harness.shrink.replay import drifted, missing_arms, replay, replay_folder

    from packcheck.guard.case_file import is_guard_case

    if is_guard_case(args.case):  # a failing guard check's case (docs/guard.md): the user's model, batch and step
        from packcheck.guard.replay import replay_guard_case
        return replay_guard_case(args.case)
    checked_timeout(args.timeout)
    engine = checked_engines([args.engine])[0] if args.engine else None
    case = read_shrunk(args.case)
    if missing := missing_arms(case):
        raise ShrunkProblem(f"{case.path}: arms lacks {', '.join(missing)}, which {case.scenario}'s judge compares; rewrite it with "
                            "`packcheck shrink`")
    if changed := drifted(case):
        print(f"packcheck replay: this packcheck builds other arms ({', '.join(changed)}) from the case's inputs than the ones it "
              "recorded (packcheck changed since it was written); replaying the recorded arms", file=sys.stderr)
    folder = replay_folder(case, engine)
    if engine is None and case.engine_dir is not None and folder is None:
        print(f"packcheck replay: {case.engine_dir}, the folder {case.engine_spec} was found in when the case was written, is not on "
              "this machine; importing the engine from the current directory", file=sys.stderr)
    # the case's own engine is looked up and started where the replay imports it from
    with contextlib.chdir(folder) if folder is not None else contextlib.nullcontext():
        if engine is None and (problem := engine_problem(case.engine_spec, set(engine_names()))):
            raise BadOption(f"{case.path} was shrunk on engine {case.engine_spec}, which names nothing here: {problem}; "
                            "or replay it against another engine with --engine")
        with tempfile.TemporaryDirectory(prefix="packcheck-replay-") as launches, LaunchPool(Path(launches), args.timeout) as pool:
            try:
                pool.engine_info(engine or case.engine_spec, case.device)  # kept by the pool for the replay
            except LaunchFailed as failed:
                print(f"packcheck replay: error: engine {engine or case.engine_spec} {not_started(failed)}: "
                      f"{first_error_line(failed.text)}", file=sys.stderr)
                return 2
            verdict = replay(case, pool, engine)
    summary = case.summary
    print(f"{summary.line()}; replayed from {case.path}", file=sys.stderr)
    again = (replay_command(case.path, folder) if engine is None
             else f"{replay_command(case.path, engine_folder(engine))} --engine {shlex.quote(engine)}")
    print(verdict.message(reproduce=again))
    return 1 if verdict.failed else 0


handle.launches = True  # main() forks the zygote of its launches first (harness/launch/zygotes.py, prefork)
