"""`packcheck replay CASE [--engine SPEC]`: run a shrunk case again (harness/shrink/replay.py) and print its verdict.

Exit status: 0 the case passes (the engine given with --engine, or the bug fixed), 1 it still fails, errs or hangs,
2 the file cannot be read or --engine names no engine. The case's own engine is replayed from the folder it recorded
(harness/shrink/replay.py), so it replays from any directory.
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
    import tempfile
    from pathlib import Path

    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.run.choices import checked_engines, checked_timeout
    from packcheck.harness.run.reproduce import engine_folder, replay_command
    from packcheck.harness.shrink.record import read_shrunk
    from packcheck.harness.shrink.replay import drifted, replay, replay_folder

    checked_timeout(args.timeout)
    engine = checked_engines([args.engine])[0] if args.engine else None
    case = read_shrunk(args.case)
    if changed := drifted(case):
        print(f"packcheck replay: this packcheck builds other arms ({', '.join(changed)}) from the case's inputs than the ones it "
              "recorded (packcheck changed since it was written); replaying the recorded arms", file=sys.stderr)
    folder = replay_folder(case, engine)
    if engine is None and case.engine_dir is not None and folder is None:
        print(f"packcheck replay: {case.engine_dir}, the folder {case.engine_spec} was found in when the case was written, is not on "
              "this machine; importing the engine from the current directory", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="packcheck-replay-") as launches, LaunchPool(Path(launches), args.timeout) as pool:
        verdict = replay(case, pool, engine)
    summary = case.summary
    print(f"{summary.line()}; replayed from {case.path}", file=sys.stderr)
    again = (replay_command(case.path, folder) if engine is None
             else f"{replay_command(case.path, engine_folder(engine))} --engine {shlex.quote(engine)}")
    print(verdict.message(reproduce=again))
    return 1 if verdict.failed else 0
