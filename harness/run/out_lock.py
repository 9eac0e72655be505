"""One run per --out at a time: two runs writing one directory interleave their results, and the last writer wins.

    lock = claim_out(RunDir(out))   # OutInUse (exit 2) if another run holds it; keep `lock` open for the run's life

Claiming the directory also marks it as holding a run in progress (RunDir.begin) and forgets an earlier run's results:
a run killed with -9 before its first verdict leaves no earlier run's results for `packcheck report` to serve as its own.

An advisory lock (flock) on the run directory's lock file (RunDir.lock), which also names its holder: the kernel drops
it with the process that held it, however that process ends (a kill -9 included), so a stale lock never blocks the
next run. Where flock does not exist (not POSIX) runs are not locked.
"""

from __future__ import annotations

import json
import os
import time
from typing import IO

from packcheck.harness.errors import InputError
from packcheck.harness.run_dir import RunDir

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

class OutInUse(InputError):
    """Another packcheck run writes to the same --out."""


def claim_out(run_dir: RunDir) -> IO | None:
    """The open lock file of `run_dir`, held until it is closed (or the process ends), the directory marked as holding a
    run in progress; OutInUse if another run holds it."""
    if fcntl is None:
        run_dir.begin()
        return None
    handle = open(run_dir.lock, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the run's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = _holder(handle.read())
        handle.close()
        raise OutInUse(f"--out {run_dir.path}: another packcheck run is writing there{holder}; wait for it to end, or give this "
                       "run another --out") from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}))
    handle.flush()
    run_dir.begin()
    return handle


def _holder(text: str) -> str:
    try:
        said = json.loads(text)
        return f" (pid {int(said['pid'])}, started {str(said['started'])[:19]})"
    except (ValueError, KeyError, TypeError):
        return ""
