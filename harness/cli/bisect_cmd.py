"""`packcheck bisect --repo PATH --good REV --bad REV --engine SPEC [--family F ...] [--scenario S ...]`.

Prints one row per family: the first bad commit (hash, subject) and the scenarios that flipped,
or why the family was not bisected. Exit 0 when every family got an answer (a first bad commit,
or not regressed), 1 when some family could not be decided (bad at --good already, an endpoint
that cannot be judged, skipped commits hiding the answer), 2 on a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.run.options import add_option

UNDECIDED = ("already bad", "cannot judge", "ambiguous")


def add_parser(commands) -> None:
    parser = commands.add_parser("bisect", help="find the first bad commit of an engine repository, per model family")
    parser.add_argument("--repo", required=True,
                        help="the engine's git repository (left untouched: revisions are checked out in a scratch worktree)")
    parser.add_argument("--good", required=True, help="a revision where the engine passes")
    parser.add_argument("--bad", required=True, help="a later revision where it fails")
    parser.add_argument("--engine", required=True,
                        help="'package.module:Class' importable from the repository's root (or a registered name), at every revision")
    parser.add_argument("--family", nargs="+", default=None, help="families to bisect (default: every family packcheck has)")
    parser.add_argument("--scenario", nargs="+", default=None, help="the scenarios that judge a revision (default: all)")
    add_option(parser, "dtype")
    add_option(parser, "device")
    add_option(parser, "timeout")
    add_option(parser, "history", means="record every probe's run (the revision it judged, its verdicts) in the history store PATH; "
               "`packcheck history --store PATH` lists the bisect's commits")
    parser.add_argument("--cache", default=None, help="JSON file of judged revisions (default: ~/.cache/packcheck/bisect.json)")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="bisect although the repository has uncommitted changes, which no judged revision contains "
                             "(default: refuse)")
    parser.set_defaults(handler=handle)


def check_range(repo: Path, good: str, bad: str, allow_dirty: bool) -> None:
    """Refuse what would make the answer meaningless: one commit twice, the endpoints swapped, or
    uncommitted changes the user may think are being judged."""
    from packcheck.harness.bisect.git import commit_of, git, succeeds

    good_commit, bad_commit = commit_of(repo, good), commit_of(repo, bad)
    if good_commit == bad_commit:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit {good_commit[:12]}: nothing to bisect")
    if not succeeds(repo, "merge-base", "--is-ancestor", good_commit, bad_commit):
        swapped = succeeds(repo, "merge-base", "--is-ancestor", bad_commit, good_commit)
        raise UsageError(f"--good {good} is not an ancestor of --bad {bad}" + (": they look swapped (--bad comes first)" if swapped else
                         ": bisect needs a good commit before the bad one on the same history"))
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no")
    if dirty and not allow_dirty:
        raise UsageError(f"{repo} has uncommitted changes ({len(dirty.splitlines())} files): bisect judges commits, so they would be "
                         "in no judged revision. Commit or stash them, or pass --allow-dirty to bisect the commits as they are")


def format_table(results) -> str:
    header = ("family", "first bad commit", "subject", "scenarios that flipped")
    rows = [(r.family, r.first_bad[:12] if r.first_bad else r.status, r.subject or r.note, ", ".join(r.flipped) or "-") for r in results]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(3)]
    return "\n".join("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)) + "  " + row[3] for row in (header, *rows))


def handle(args) -> int:
    from packcheck.harness.bisect import SWAPPED, Probe, bisect_families
    from packcheck.harness.bisect.cache import VerdictCache, default_cache_path
    from packcheck.harness.bisect.git import GitError, git
    from packcheck.harness.models import FAMILIES, get_family
    from packcheck.harness.run.choices import checked_dtype, checked_timeout
    from packcheck.harness.scenarios import get_scenario

    try:
        repo = Path(git(Path(args.repo), "rev-parse", "--show-toplevel"))
    except GitError as err:
        raise UsageError(f"--repo {args.repo} is not a git repository: {err}") from err
    checked_dtype(args.dtype)
    families = args.family or sorted(FAMILIES)
    for family in families:
        get_family(family)
    for scenario in args.scenario or ():
        get_scenario(scenario)
    checked_timeout(args.timeout)
    cache = VerdictCache(Path(args.cache) if args.cache else default_cache_path())
    cache.check()
    check_range(repo, args.good, args.bad, args.allow_dirty)
    from packcheck.harness.history.record import store_path

    history = store_path(args.history)
    probe = Probe(engine=args.engine, families=tuple(families), scenarios=tuple(args.scenario or ()), dtype=args.dtype,
                  device=args.device, timeout=args.timeout, history=str(history) if history else "")
    results = bisect_families(repo, args.good, args.bad, probe, cache)
    print(format_table(results))
    swapped = [r.family for r in results if r.note == SWAPPED]
    if swapped:
        print(f"packcheck bisect: {', '.join(swapped)} fail{'s' * (len(swapped) == 1)} at --good {args.good} and pass{'es' * (len(swapped) == 1)} "
              f"at --bad {args.bad}: did you swap them? --good is a revision where the engine passes, --bad a later one where "
              "it fails. In this history the range goes from failing to passing: it fixed the engine, there is no first bad "
              "commit in it", file=sys.stderr)
    return 1 if any(r.status in UNDECIDED for r in results) else 0
