"""The checkpoint cache's digests: recorded when an entry is written, held in memory for a run, checked before use.

    digests(folder)                sha256 of every file of a checkpoint folder (what `<entry>.digests.json` records)
    pin(cache)                     the pool, before it starts its first engine process: the entries it uses from then on
                                   are checked again when its last launch has ended (unpin)
    held()                         every entry this process holds digests of, with them (harness/models/vouch.py hands
                                   them to the harness processes it starts)
    expected(entry)                what this process expects of `entry`: the digests it computed when it wrote the entry
                                   or checked it against its seed (harness/models/checkpoint.py), else None
    mismatch(folder, entry)        None when `folder` (the entry, or a copy of it) holds exactly the expected files,
                                   else a sentence naming the first file that differs; hashed again only when a
                                   file's stats (inode, size, mtime, ctime) moved since it last matched
    unpin() -> [str]               when the pool's last launch has ended: each entry used in the run that no longer
                                   matches, named (the caller rebuilds it: harness/models/checkpoint.py)

An engine runs as the harness's user and can write into the cache (PACKCHECK_CACHE_DIR), and so can it write whatever
is recorded beside an entry. So a process trusts only digests it computed itself: of an entry it wrote, or of one it
checked against its seed (harness/models/seed_check.py; an entry planted by an engine during an earlier run once made
a wrong engine green in the next). `<entry>.digests.json` is still written, for people; nothing reads it.

Cost: a full sha256 of every file when an entry is written or first checked in a process, and once per launch's
private copy (harness/launch/private_checkpoint.py). At the tiny size that is under a millisecond; at 0.6b (3.2 GB of
float32 weights) 6.5 s per pass at the 0.5 GB/s measured on the loaded 2-core CI machine (docs/isolation.md); at 8B
(16 GB of bfloat16) 10-30 s per pass (0.5 GB/s there, 1-2 GB/s on an unloaded core with SHA instructions). So the files'
stats (inode, size, mtime, ctime) when their digests were hashed are held with them: within the process an entry whose
files have not moved since is not hashed again; a file that moved (a write moves its ctime, which no process sets
back) is hashed and judged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CHUNK = 1 << 24

_held: dict[str, dict[str, str]] = {}  # entry path -> file name -> sha256, as computed by this process
_held_stats: dict[str, tuple | None] = {}  # entry path -> its files' stats when those digests were hashed (None: unknown)
_used: set[str] = set()  # entries the run checked (and so relies on)
_checked: dict[str, tuple] = {}  # folder -> (its files' stats, the digests they matched): not hashed again while unchanged
_holders = 0


def record_path(entry: Path) -> Path:
    return entry.with_name(entry.name + ".digests.json")


def _pieces(handle, suffix: str) -> Iterator[tuple[bytes, bytes]]:
    """(bytes of the file, bytes its digest takes) in order; of a safetensors file, its header is hashed with sorted
    keys: safetensors writes its metadata in no fixed order (two writes of the same tensors in one process differed),
    the tensors' bytes in one."""
    if suffix == ".safetensors":
        prefix = handle.read(8)
        raw = handle.read(int.from_bytes(prefix, "little"))
        try:
            header = json.loads(raw)
        except ValueError:
            header = None  # not a safetensors file (anymore): hashed as it is, and so differs
        if header is not None:
            yield prefix + raw, json.dumps(header, sort_keys=True).encode()
        else:
            handle.seek(0)
    while chunk := handle.read(CHUNK):
        yield chunk, chunk


def digests(folder: Path) -> dict[str, str]:
    """sha256 per file (of a safetensors file, of its header with sorted keys and then its data: _pieces)."""
    found = {}
    for path in sorted(folder.iterdir()):
        if path.is_file():
            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for _, hashed_part in _pieces(handle, path.suffix):
                    sha.update(hashed_part)
            found[path.name] = sha.hexdigest()
    return found


def copy_hashed(source: Path, target: Path) -> dict[str, str]:
    """Copy the files of `source` into a new folder `target` and return the digests of what was written (as digests()
    would give), hashing on a second thread while the main one writes: at 8B one pass of 10-30 s instead of a copy and
    then a hash. `target`'s stats are remembered with them, so checking the copy against an entry does not hash it again."""
    target.mkdir(parents=True)
    found = {}
    with ThreadPoolExecutor(max_workers=1) as hasher:
        for path in sorted(source.iterdir()):
            if not path.is_file():
                continue
            sha = hashlib.sha256()
            with open(path, "rb") as handle, open(target / path.name, "wb") as out:
                pending = None
                for raw, hashed_part in _pieces(handle, path.suffix):
                    if pending is not None:
                        pending.result()
                    pending = hasher.submit(sha.update, hashed_part)  # hashlib lets go of the GIL for large buffers
                    out.write(raw)
                if pending is not None:
                    pending.result()
            shutil.copystat(path, target / path.name)
            found[path.name] = sha.hexdigest()
    stats = _stats(target)
    if stats is not None:
        _checked[str(target)] = (stats, found)
    return found


def hashed(folder: Path) -> tuple[dict[str, str], tuple | None]:
    """digests(folder), and its files' stats when they did not move while it was hashed (else None)."""
    before = _stats(folder)
    found = digests(folder)
    return found, before if before is not None and before == _stats(folder) else None


def record(entry: Path, found: dict[str, str], stats: tuple | None = None) -> None:
    """Hold `entry`'s digests (computed by this process: it wrote the entry, or checked it against its seed) and write
    them beside it, for people. `stats`: its files' stats when `found` was hashed (hashed(); a folder renamed into place
    keeps its files' stats): a later check in this process hashes the entry again only if a file moved."""
    kept = stats if stats is not None and stats == _stats(entry) else None
    record_path(entry).write_text(json.dumps(found, indent=1))
    _held[str(entry)] = found
    _held_stats[str(entry)] = kept
    if kept is not None:
        _checked[str(entry)] = (kept, found)


def pin(cache: Path) -> None:
    """A run starts: the entries it checks from now on are checked again when it ends (unpin)."""
    global _holders
    _holders += 1


def held() -> dict[str, dict[str, str]]:
    """Every entry this process holds digests of (it wrote it, or checked it against its seed), with them."""
    return {entry: dict(found) for entry, found in _held.items()}


def expected(entry: Path) -> dict[str, str] | None:
    """The digests this process computed for `entry`, or None: it has not written or checked it."""
    return _held.get(str(entry))


def expected_stats(entry: Path) -> tuple | None:
    """The stats `entry`'s files had when its expected digests were hashed (None: unknown)."""
    return _held_stats.get(str(entry))


def _stats(folder: Path) -> tuple | None:
    """(name, inode, size, mtime, ctime) of every file: a write moves the ctime, which no process can set back."""
    try:
        return tuple((p.name, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for p in sorted(folder.iterdir()) if (s := p.lstat()))
    except OSError:
        return None


def mismatch(folder: Path, entry: Path) -> str | None:
    want = expected(entry)
    if want is None:
        return "this process neither wrote it nor checked it against its seed"
    _used.add(str(entry))
    stats = _stats(folder)
    if stats is not None and _checked.get(str(folder)) == (stats, want):
        return None
    if stats is not None and folder == entry and expected_stats(entry) == stats:  # not one file moved since it was hashed
        _checked[str(folder)] = (stats, want)
        return None
    try:
        found = digests(folder)
    except OSError as err:
        return f"it cannot be read ({err})"
    for name in sorted(set(want) | set(found)):
        if want.get(name) != found.get(name):
            what = "is missing" if name not in found else "is not recorded" if name not in want else "has changed"
            return f"{folder / name} {what} (sha256 {found.get(name, '-')[:16]}, recorded {want.get(name, '-')[:16]})"
    if stats is not None and stats == _stats(folder):
        _checked[str(folder)] = (stats, want)
    return None


def unpin() -> list[tuple[Path, str]]:
    """(entry, what differs) for each entry the run used that no longer matches what the run expected of it."""
    global _holders
    _holders = max(0, _holders - 1)
    if _holders:
        return []
    damaged = [(Path(entry), problem) for entry in sorted(_used) if (problem := mismatch(Path(entry), Path(entry))) is not None]
    _used.clear()
    _checked.clear()
    return damaged
