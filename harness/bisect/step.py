"""The command `git bisect run` calls at each revision: judge the checked-out commit for one family.

    python -I -c BOOTSTRAP --family F --cache FILE --engine SPEC --families F ... [--scenario S ...] ...

Run isolated (-I): the current directory is the scratch worktree, and a `harness` package of the
repository under bisection must not replace this one here (it does, on purpose, inside the
`packcheck run` subprocess that judges the revision). Exit 0 good, 1 bad, 125 skip; any
failure of packcheck itself exits 255, which stops the bisection instead of calling a commit bad,
including a failure to import this module (Python would exit 1: "bad"), hence BOOTSTRAP.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from packcheck.harness.bisect.cache import VerdictCache
from packcheck.harness.bisect.git import git
from packcheck.harness.bisect.judge import EXIT_CODES, Probe, describe, judge
from packcheck.harness.run.options import add_option

ABORT = 255
BOOTSTRAP = ("import sys\ntry:\n    from packcheck.harness.bisect.step import main\nexcept BaseException:\n"
             "    import traceback\n    traceback.print_exc()\n    sys.exit(255)\nsys.exit(main(sys.argv[1:]))")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="packcheck.harness.bisect.step")
    parser.add_argument("--family", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--engine", required=True)
    parser.add_argument("--families", nargs="+", required=True)
    parser.add_argument("--scenario", nargs="+", default=[])
    for shared in ("dtype", "device", "timeout", "history"):
        add_option(parser, shared)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
    except SystemExit:  # argparse has printed the usage error
        return ABORT
    try:
        probe = Probe(engine=args.engine, families=tuple(args.families), scenarios=tuple(args.scenario), dtype=args.dtype,
                      device=args.device, timeout=args.timeout, history=args.history or "")
        worktree = Path.cwd()
        commit = git(worktree, "rev-parse", "HEAD")
        outcome, cached = judge(probe, worktree, commit, args.family, VerdictCache(Path(args.cache)))
        print(f"  {args.family} @ {commit[:12]}: {describe(outcome, cached)}", file=sys.stderr, flush=True)
        return EXIT_CODES[outcome.status]
    except BaseException:  # noqa: BLE001 - never let a packcheck failure read as a bad commit
        traceback.print_exc()
        return ABORT


if __name__ == "__main__":
    sys.exit(main())
