"""Which live processes belong to a run directory, for the tests that no process of a run outlives it.

A process belongs to PATH if its command line names it, its working directory is inside it, or it holds a file inside
it open: a launch's processes are forks of a zygote (harness/launch/zygote.py), so their command line is the zygote's,
but a warden and its agent write the launch's agent.log, a rank its logs and runs in its case's folder, torch
elastic's stand-in for a rank names the job, and an engine's own children whatever the engine gave them.
"""

from __future__ import annotations

import os
from pathlib import Path


def processes_of(path: Path | str) -> list[str]:
    """`pid: command line` of every live process (but this one) that belongs to `path`."""
    root = os.path.realpath(path)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            places = [os.readlink(entry / "cwd")]
            for fd in (entry / "fd").iterdir():
                try:
                    places.append(os.readlink(fd))
                except OSError:
                    continue
        except OSError:  # gone meanwhile, or a zombie
            continue
        if str(path) in cmdline or root in cmdline or any(p == root or p.startswith(root + os.sep) for p in places):
            found.append(f"{entry.name}: {cmdline}")
    return found
