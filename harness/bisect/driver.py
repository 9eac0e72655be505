"""Per family: judge both endpoints, then let `git bisect run` find the first bad commit.

A family is bisected only if it is good at --good and bad at --bad; otherwise its row says why
not (not regressed, already bad, cannot be judged). All bisections share one scratch worktree
and one cache: the endpoints and every step are judged at most once per (commit, family).
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from packcheck.harness.bisect.cache import BAD, GOOD, VerdictCache
from packcheck.harness.bisect.git import GitError, commit_of, git, git_env, subject
from packcheck.harness.bisect.judge import Probe, describe, judge
from packcheck.harness.bisect.step import BOOTSTRAP
from packcheck.harness.bisect.worktree import scratch_worktree

REGRESSED, NOT_REGRESSED, ALREADY_BAD, UNJUDGED, AMBIGUOUS = "regressed", "not regressed", "already bad", "cannot judge", "ambiguous"
# --good fails and --bad passes: the labels are the wrong way round for this history (it fixed the engine)
SWAPPED = "bad at --good, good at --bad: --good and --bad swapped?"
HASH = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyResult:
    family: str
    status: str  # regressed | not regressed | already bad | cannot judge | ambiguous
    first_bad: str = ""  # the first bad commit (regressed)
    subject: str = ""
    flipped: tuple[str, ...] = ()  # scenarios failing at the first bad commit
    note: str = ""  # candidates (ambiguous), or why an endpoint cannot be judged


def _git_bisect(worktree: Path, good: str, bad: str, probe: Probe, family: str, cache: VerdictCache) -> tuple[str, str]:
    """Run `git bisect run` for one family; (first bad commit, "") or ("", candidates) when skips hide it."""
    git(worktree, "bisect", "start", bad, good)
    try:
        step = [sys.executable, "-I", "-c", BOOTSTRAP, "--family", family, "--cache", str(cache.path), *probe.to_args()]
        done = subprocess.run(["git", "-C", str(worktree), "bisect", "run", *step], stdout=subprocess.PIPE, text=True, env=git_env())
        if "is the first bad commit" in done.stdout:
            return git(worktree, "rev-parse", "refs/bisect/bad"), ""
        candidates = [line for line in done.stdout.split() if HASH.match(line)]
        if "only 'skip'ped commits left" in done.stdout and candidates:
            return "", " ".join(c[:12] for c in candidates)
        raise GitError(f"git bisect run ended with exit {done.returncode} without a first bad commit:\n{done.stdout[-2000:]}")
    finally:
        git(worktree, "bisect", "reset", check=False)


def _bisect_family(repo: Path, worktree: Path, good: str, bad: str, probe: Probe, family: str, cache: VerdictCache,
                   log: TextIO) -> FamilyResult:
    ends = {}
    for name, commit in (("good", good), ("bad", bad)):
        outcome, cached = judge(probe, worktree, commit, family, cache)
        print(f"  {family} @ {commit[:12]} (--{name}): {describe(outcome, cached)}", file=log, flush=True)
        ends[name] = outcome
    if ends["good"].status == BAD and ends["bad"].status == GOOD:
        return FamilyResult(family=family, status=ALREADY_BAD, flipped=ends["good"].failing, note=SWAPPED)
    if ends["good"].status == BAD:
        return FamilyResult(family=family, status=ALREADY_BAD, flipped=ends["good"].failing, note="bad at --good already")
    if ends["good"].status != GOOD or ends["bad"].status not in (GOOD, BAD):
        unjudged = ends["good"] if ends["good"].status != GOOD else ends["bad"]
        return FamilyResult(family=family, status=UNJUDGED, note=(unjudged.reason.splitlines() or ["no output"])[-1])
    if ends["bad"].status == GOOD:
        return FamilyResult(family=family, status=NOT_REGRESSED, note="good at --bad")
    first, candidates = _git_bisect(worktree, good, bad, probe, family, cache)
    if not first:
        return FamilyResult(family=family, status=AMBIGUOUS, note=f"skipped commits hide it; one of {candidates}")
    outcome, _ = judge(probe, worktree, first, family, cache)
    if outcome.status != BAD:  # git took a step that could not run (exit 1 from a failed import) as "bad"
        raise GitError(f"git bisect named {first[:12]} the first bad commit for {family}, but packcheck judges it "
                       f"{describe(outcome, False)}: the bisect step itself failed (see its messages above)")
    return FamilyResult(family=family, status=REGRESSED, first_bad=first, subject=subject(repo, first), flipped=outcome.failing)


def bisect_families(repo: Path, good: str, bad: str, probe: Probe, cache: VerdictCache, log: TextIO | None = None) -> list[FamilyResult]:
    """The first bad commit between `good` and `bad` for each of the probe's families, in its order."""
    log = log or sys.stderr
    good_commit, bad_commit = commit_of(repo, good), commit_of(repo, bad)
    with scratch_worktree(repo, bad_commit) as worktree:
        print(f"bisecting {good_commit[:12]}..{bad_commit[:12]} of {repo} in scratch worktree {worktree}", file=log, flush=True)
        return [_bisect_family(repo, worktree, good_commit, bad_commit, probe, family, cache, log) for family in probe.families]
