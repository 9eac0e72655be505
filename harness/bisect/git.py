"""Git calls: each names the directory it runs in; GIT_* variables of the caller are dropped so a
call can only ever act on that directory's repository."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class GitError(RuntimeError):
    pass


def git_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}


def git(cwd: str | Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, env=git_env())
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)} (in {cwd}) failed with exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout.strip()


def succeeds(cwd: str | Path, *args: str) -> bool:
    """Whether a git query exits 0 (`merge-base --is-ancestor` answers only so)."""
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=git_env()).returncode == 0


def commit_of(repo: str | Path, rev: str) -> str:
    """The full hash of `rev`; LookupError (a usage error) if it names no commit."""
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True, env=git_env())
    if done.returncode != 0:
        raise LookupError(f"{rev!r} is not a commit of the repository {repo}")
    return done.stdout.strip()


def subject(repo: str | Path, commit: str) -> str:
    return git(repo, "log", "-1", "--format=%s", commit)
