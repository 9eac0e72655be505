"""The commit of the engine under test, where its code sits in a git checkout: what a baseline comparison needs to
name (the engine changed between the runs, not packcheck). Found without importing the engine, from the folder its
`module:Class` spec imports from (harness/run/reproduce.py) or the folder of its file spec."""

from __future__ import annotations

import subprocess

from packcheck.harness.run.reproduce import engine_folder


def engine_commit(spec: str) -> str | None:
    """HEAD of the git checkout holding the engine's code (+dirty), or None: a registered or installed engine, no git."""
    folder = engine_folder(spec)
    if folder is None:
        return None
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], check=False, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"], check=False, capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def engine_commits(specs: list[str]) -> dict[str, str]:
    """spec -> its commit, for the engines whose code is in a git checkout ({} when none is)."""
    return {spec: commit for spec in specs if (commit := engine_commit(spec)) is not None}


def engine_commit_depth(spec: str) -> int | None:
    """How many commits the engine's checkout's HEAD has in its history (`git rev-list --count HEAD`): its place along
    the history, which orders commits where their times tie or a bisect visited them out of order (harness/history);
    None where the engine's code is in no git checkout."""
    folder = engine_folder(spec)
    if folder is None:
        return None
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-list", "--count", "HEAD"], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else None
