"""Files written so that a reader never sees half of one: a temporary file beside the target, then
a rename (atomic on POSIX). Results, reports, launch markers and goldens' files all go through here.

The bottom floor (docs/architecture.md): standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path`: readers see the old file or the new one. An OSError names `path`."""
    path = Path(path)
    scratch = path.with_name(f".{path.name}.tmp")
    try:
        scratch.write_text(text, encoding="utf-8", errors="backslashreplace")
        os.replace(scratch, path)
    except OSError as err:
        raise OSError(err.errno, f"cannot write {path} ({err.strerror}): choose a writable path") from None


def write_json_atomically(path: Path, data) -> None:
    write_atomically(path, json.dumps(data, indent=1))


def restore(path: Path, data: bytes) -> str:
    """Write `data` back to `path` (a file a process of an engine changed: the seals of harness/golden/seal.py and
    harness/own_files.py), atomically; says how it went, as the end of a sentence."""
    try:
        descriptor, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(scratch, path)
    except OSError as err:
        return f"it could not be restored ({err}): restore it from version control or reinstall packcheck"
    return "the file is restored from that copy"
