"""packcheck's own installed files (the reference's code, the harness code its ranks import, package data) as a run read
them before any engine process existed, held in memory for the run; a file changed since is named, kept aside in the
temporary folder (it may be someone's edit) and written back.

    pin(folders)        the pool, before it starts its first engine process: every file below `folders` into memory
    check() -> [str]    before each launch starts, and at unpin: each file changed, removed or added since, named; a
                        changed or removed one written back from memory (so the next launch imports packcheck's code)
    unpin() -> [str]    when the pool's last launch has ended: check() a last time, and release the pin

The second line behind the launch's mount namespace (harness/launch/confine.py), where packcheck's folders are
read-only to an engine; the only line where the machine allows no namespace. An engine that rewrote the installed
reference's model config once made the float64 oracle build the same wrong RoPE as the engine: oracle_agreement passed
at error 0, and the edit stayed for the next run. The goldens are held apart, with their own messages
(harness/golden/seal.py), and left out here.

Cost: a pin reads the files once per process (about 3 MB); a later pin reads only the files whose stats (inode, size,
mtime, ctime) moved since the last check, which found them as held. A check stats every file (a few milliseconds).
Pins nest; the outermost one reports.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from packcheck.harness.files import restore

Stats = tuple[int, int, int, int]

_held: dict[str, tuple[Stats, bytes]] = {}  # path -> its stats and bytes when last found as held; kept between pins
_reported: set[str] = set()  # paths named during this pin (a file is named once)
_skipped: tuple[str, ...] = ()
_folders: tuple[str, ...] = ()
_holders = 0


def _stats(path: str) -> Stats | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _files() -> list[str]:
    """Every file below the pinned folders but the skipped ones and bytecode caches."""
    found = []
    for folder in _folders:
        for root, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if d != "__pycache__" and os.path.join(root, d) not in _skipped]
            found += [os.path.join(root, name) for name in names]
    return found


def _read(path: str) -> None:
    stats = _stats(path)
    if stats is not None and (path not in _held or _held[path][0] != stats):
        try:
            with open(path, "rb") as handle:
                _held[path] = (stats, handle.read())
        except OSError:
            pass


def pin(folders: list[Path], skip: list[Path] = ()) -> None:
    """Hold every file below `folders` (but below `skip`), each read once while a pin is held."""
    global _holders, _folders, _skipped
    _holders += 1
    if _holders > 1:
        return
    _folders = tuple(os.path.realpath(f) for f in folders if os.path.isdir(f))
    _skipped = tuple(os.path.realpath(s) for s in skip)
    _reported.clear()
    present = _files()
    for path in set(_held) - set(present):
        del _held[path]
    for path in present:
        _read(path)


def check() -> list[str]:
    """One sentence per held file changed or removed since it was read (each written back) and per file added."""
    if not _holders:
        return []
    problems = []
    present = _files()
    for path in present:
        if path not in _held and path not in _reported:
            _reported.add(path)
            problems.append(f"the file {path} was added to packcheck's own files while this run ran (a process of an "
                            "engine can write them where the operating system does not stop it): it is left there; "
                            "remove it, or reinstall packcheck")
    for path, (stats, data) in list(_held.items()):
        now = _stats(path)
        if now == stats:
            continue
        try:
            with open(path, "rb") as handle:
                same = handle.read() == data
        except OSError:
            same = False
        if not same:
            problems.append(f"the file {path} was changed while this run ran (a process of an engine can write packcheck's "
                            f"files where the operating system does not stop it): launches started after the change may have "
                            f"run it; {kept_aside(path)}, and {restore(Path(path), data)}")
        _held[path] = (_stats(path) or stats, data)
    return problems


def kept_aside(path: str) -> str:
    """The changed file copied to the temporary folder before it is written back (someone's edit is never lost); says
    where, as part of a sentence."""
    try:
        with open(path, "rb") as handle:
            changed = handle.read()
        descriptor, aside = tempfile.mkstemp(prefix=f"packcheck-changed-{Path(path).name}-")
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(changed)
    except OSError as err:
        return f"the changed version could not be kept ({err.strerror or err})"
    return f"the changed version is kept at {aside}"


def unpin() -> list[str]:
    """Release the pin; at the outermost, check() a last time."""
    global _holders
    if not _holders:
        return []
    problems = check() if _holders == 1 else []
    _holders -= 1
    return problems
