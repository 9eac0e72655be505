"""The parent's guard over one launch: run the agent, and kill the launch if it stops making progress.

The ranks' own watchdogs end a hung case within its timeout. This guard is the backstop for what
they cannot handle (the agent itself stuck, a rank wedged with the GIL held past faulthandler):
when no case has started for `stall_seconds` (or no rank reached its first case within
`startup_seconds`), it kills the agent and every rank it started. Ranks run in sessions of their
own (torch elastic starts them so), so they are killed by their recorded process ids, after
checking that each id still belongs to this launch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

POLL_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class GuardedExit:
    returncode: int
    killed_after: float | None  # seconds without progress after which the guard killed the launch


def run_guarded(command: list[str], env: dict[str, str], log: Path, last_progress: Callable[[], float | None],
                pid_files: Callable[[], list[Path]], startup_seconds: float, stall_seconds: float,
                marker: str) -> GuardedExit:
    """Run `command` to its end, or kill it and its ranks when `last_progress()` (a wall-clock time,
    None before the first case started) is older than allowed. `marker` is a string in every
    launched process's command line (the job path)."""
    started = time.time()
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while process.poll() is None:
            time.sleep(POLL_SECONDS)
            progress = last_progress()
            quiet = time.time() - (progress or started)
            if quiet > (stall_seconds if progress is not None else startup_seconds):
                kill_launch(process, pid_files(), marker)
                return GuardedExit(returncode=process.wait(), killed_after=quiet)
    return GuardedExit(returncode=process.returncode, killed_after=None)


def kill_launch(process: subprocess.Popen, pid_files: list[Path], marker: str) -> None:
    _kill_group(process.pid)
    for path in pid_files:
        try:
            pid = int(path.read_text())
        except (OSError, ValueError):
            continue
        if marker in _command_line(pid):
            _kill_group(pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
