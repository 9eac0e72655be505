"""The parent's hold on one launch's processes: start the agent, watch it, kill it and every rank.

The ranks' own watchdogs end a hung case within its timeout. The parent's guard is the backstop
for what they cannot handle (the agent itself stuck, a rank wedged with the GIL held past
faulthandler, a case that never starts): the Launch that owns it kills the agent and every rank it
started. Ranks run in sessions of their own (torch elastic starts them so), so they are killed by
their recorded process ids, after checking that each id still belongs to this launch.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import IO


class GuardedProcess:
    """The agent of one launch, in a session of its own, its output in `log`."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, marker: str):
        self.marker = marker  # a string in every launched process's command line (the job path)
        self._log: IO = open(log, "w")  # noqa: SIM115 - open for the life of the process
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def poll(self) -> int | None:
        """The exit status once the agent has ended, else None."""
        status = self.process.poll()
        if status is not None:
            self._log.close()
        return status

    def wait(self, seconds: float) -> int | None:
        try:
            return self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
        finally:
            self.poll()

    def kill(self, pid_files: list[Path]) -> int:
        """SIGKILL the agent's session and every rank named in `pid_files` that still belongs to this launch."""
        _kill_group(self.process.pid)
        for path in pid_files:
            try:
                pid = int(path.read_text())
            except (OSError, ValueError):
                continue
            if self.marker in _command_line(pid):
                _kill_group(pid)
        status = self.process.wait()
        self.poll()
        return status


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
