"""A launch's private copy of the checkpoint its cases start from: copied from the cache once, and again
before a case only if a case before it changed anything there.

The copy is checked against the digests the run holds for the cache entry (harness/models/cache_seal.py) before a
case gets it: an entry an engine wrote into is named and rebuilt from its seed, and copied again.

The engine may load, convert or even overwrite the checkpoint it is handed; the cached one every other
arm and run starts from is never handed out. Copying it for every case cost 8 s per arm at the 0.6b
size (3 GiB of float32 weights; benchmarks/harness_overhead.py), more than the engine's step on a GPU.
Each case still starts from an untouched copy: after a case, the copy's fingerprint (every entry's
inode, size, mtime and ctime, the folder's own included) must equal the one taken right after copying,
or it is copied afresh. A write, a truncation, a rename, an added or removed file all move the ctime
(which no process can set back), so nothing a case did reaches the next one. The copy goes when its launch
closes (`remove`): a run holds at most one copy per live launch on disk.

Why a copy, not the cache itself shared read-only: the engine runs as the harness's user (often root in a
container, which no file mode stops), so it could change a shared file in place, and the change would reach
the cache every later arm and run starts from; the fingerprint would see it only afterwards. A copy-on-write
clone would be free, but the usual file systems (ext4 here) have none.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from packcheck.harness.models import checkpoint_problem, copy_checkpoint, repair_checkpoint

Fingerprint = tuple[tuple[str, int, int, int, int], ...]


def fingerprint(directory: Path) -> Fingerprint | None:
    """(path, inode, size, mtime, ctime) of the folder and everything under it; None if it cannot be read."""
    try:
        entries = []
        for root, dirs, files in os.walk(directory):
            for name in [".", *sorted(dirs), *sorted(files)]:
                path = os.path.join(root, name)
                stat = os.lstat(path)
                entries.append((os.path.relpath(path, directory), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns))
        return tuple(entries) if entries else None
    except OSError:
        return None


class PrivateCheckpoint:
    """The copy at `directory` of the last checkpoint a case of the launch asked for (one at a time: a launch
    serving another model drops the copy of the one before)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.source: str | None = None
        self.fingerprint: Fingerprint | None = None

    def for_case(self, source: str) -> Path:
        """The private copy of `source`, as copied: made afresh where it is new or a case changed it."""
        if source != self.source or self.fingerprint is None or fingerprint(self.directory) != self.fingerprint:
            self._copy(source)
            problem = checkpoint_problem(self.directory, source)
            if problem is not None:  # the cache entry changed since the run recorded it (an engine wrote into the cache)
                repair_checkpoint(source, problem)
                self._copy(source)
                if (problem := checkpoint_problem(self.directory, source)) is not None:
                    raise RuntimeError(f"the checkpoint {source} does not match its digests even after a rebuild: {problem}")
        return self.directory

    def _copy(self, source: str) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        copy_checkpoint(source, self.directory)
        self.source, self.fingerprint = source, fingerprint(self.directory)

    def remove(self) -> None:
        """Delete the copy (its launch has closed); a later case copies afresh."""
        shutil.rmtree(self.directory, ignore_errors=True)
        self.source, self.fingerprint = None, None
