"""The parent's hold on one launch's processes: start the agent under its warden, watch it, kill the whole tree.

The ranks' own watchdogs end a hung case within its timeout. The parent's guard is the backstop
for what they cannot handle (the agent itself stuck, a rank wedged with the GIL held past
faulthandler, a case that never starts): the Launch that owns it kills the warden and every process
below it (warden.kill_tree: the agent, the ranks, and whatever they started, `setsid` or not, which
the warden as a subreaper keeps in its tree). Ranks run in sessions of their own (torch elastic starts
them so); the ones whose recorded process ids still belong to this launch are killed by id as well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from packcheck.harness.launch.warden import SCRIPT, kill_tree


class GuardedProcess:
    """The agent of one launch under its warden (harness/launch/warden.py), in a session of their own, their
    output in `log`. The status is the warden's, which is the agent's."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path, marker: str):
        self.marker = marker  # a string in every launched process's command line (the job path)
        self._log: IO = open(log, "w")  # noqa: SIM115 - open for the life of the process
        self.process = subprocess.Popen([sys.executable, SCRIPT, *command], env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

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
        """SIGKILL the warden's tree (the agent, the ranks and all they started) and every rank named in `pid_files`
        that still belongs to this launch."""
        if self.process.poll() is None:  # else its pid may be another process's by now
            kill_tree(self.process.pid, include_root=True)
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
