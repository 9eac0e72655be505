"""The goldens as a run read them before any engine process existed, held in memory for the run.

    pin()              the pool, before it starts its first engine process: every family's golden files into memory
    files(path)        what the run reads for the golden at `path`: the pinned bytes, else the files on disk
    unpin() -> [str]   when the pool's last launch has ended: each golden file whose bytes on disk are no longer the
                       pinned ones is named and written back from memory

An engine runs as the harness's user and can write packcheck's own package data: the goldens, their provenance
(noise floors included) and the digests recorded there. What the run compares with is what it read before any
engine process existed, so nothing an engine writes during the run changes a verdict of that run; and since no
process of an engine outlives its launch (harness/launch/warden.py), a write found at the end is restored before
a later run can read it. What this does not cover (a golden changed outside any run): docs/isolation.md.

Pins nest (a run of runs, the conformance suite's pool inside a test): the outermost pin is the one read first.
"""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.files import restore

_pinned: dict[Path, dict[str, bytes]] | None = None  # family folder -> file name -> bytes, as read at pin time
_holders = 0


def _read(folder: Path) -> dict[str, bytes]:
    found = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_file() and not entry.is_symlink():
            found[entry.name] = entry.read_bytes()
    return found


def pin(root: Path) -> None:
    """Read every golden under `root` (one folder per family) into memory, each folder once while a pin is held."""
    global _pinned, _holders
    _holders += 1
    if _pinned is None:
        _pinned = {}
    if root.is_dir():  # a nested pin of another root (a test's copy of the goldens) reads that root's folders too
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and not folder.name.startswith(".") and not folder.name.endswith(".obtained"):
                _pinned.setdefault(folder.resolve(), _read(folder))


def files(path: Path) -> dict[str, bytes] | None:
    """The golden folder `path` as pinned (file name -> bytes), or None when no pin holds it."""
    if _pinned is None:
        return None
    return _pinned.get(path.resolve())


def forget(path: Path) -> None:
    """`path` is being rewritten on purpose (golden regen): the run reads it from disk from now on."""
    if _pinned is not None:
        _pinned.pop(path.resolve(), None)


def unpin() -> list[str]:
    """Release the pin; at the outermost, one sentence per golden file that changed on disk since it was read, each
    written back from memory."""
    global _pinned, _holders
    _holders = max(0, _holders - 1)
    if _holders or _pinned is None:
        return []
    pinned, _pinned = _pinned, None
    problems = []
    for folder, stored in pinned.items():
        for name, data in stored.items():
            path = folder / name
            try:
                changed = path.read_bytes() != data
            except OSError:
                changed = True
            if changed:
                problems.append(f"the golden file {path} was changed while this run ran (a process of an engine can write "
                                f"packcheck's files): this run compared with the copy it read at its start, and {restore(path, data)}")
    return problems
