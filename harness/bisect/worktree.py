"""A scratch worktree: `git worktree add --detach` into a temporary directory, removed afterwards.

Every revision is checked out and bisected there; `git bisect` state (refs/bisect/*, BISECT_LOG)
is per worktree, so the user's working tree, index, HEAD and any bisect of their own stay as they
were. Removal also prunes the worktree's administrative files, even after a crash in between.
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from packcheck.harness.bisect.git import git


@contextmanager
def scratch_worktree(repo: Path, commit: str) -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="packcheck-bisect-"))
    path = parent / "worktree"
    git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
    try:
        yield path
    finally:
        git(repo, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(parent, ignore_errors=True)
        git(repo, "worktree", "prune", check=False)


def checkout(worktree: Path, commit: str) -> None:
    """Put the scratch worktree at `commit` (a no-op where it already is, as inside `git bisect run`)."""
    if git(worktree, "rev-parse", "HEAD") != commit:
        git(worktree, "checkout", "--detach", "--quiet", "--force", commit)
