"""The parent's hold on one launch's processes: its warden as forked by the pool's zygote, watched, and killed whole.

The ranks' own watchdogs end a hung case within its timeout. The parent's guard is the backstop
for what they cannot handle (the agent itself stuck, a rank wedged with the GIL held past
faulthandler, a case that never starts): the Launch that owns it kills the warden and every process
below it (process_tree.kill_tree: the agent, the ranks, and whatever they started, `setsid` or not, which
the warden as a subreaper keeps in its tree). Ranks run in sessions of their own; the ones whose recorded
identity (pid and start time) is still a live process are killed by process group as well.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from packcheck.harness.launch.process_tree import kill_tree, start_time

REAPED_SECONDS = 10.0  # for the zygote to reap a killed warden and say so


class GuardedLaunch:
    """One launch's warden as the harness sees it (request `request` of `zygote`, a zygotes.Zygote): its pid once forked,
    its exit status once reaped, the launch's output in `log`."""

    def __init__(self, zygote, request: int, log: Path):
        self.zygote, self.request, self.log = zygote, request, log

    @property
    def pid(self) -> int | None:
        self.zygote.pump()
        return self.zygote.started.get(self.request)

    @property
    def confined(self) -> str | None:
        """How its warden confined the launch (harness/launch/confine.py), or why not; None until the zygote said."""
        self.zygote.pump()
        return self.zygote.confined.get(self.request)

    def poll(self) -> int | None:
        """The exit status (negative: the signal that ended it) once the warden has ended, else None. A zygote gone
        before it said so took its wardens with it."""
        pid = self.pid
        if pid is not None and pid in self.zygote.ended:
            return os.waitstatus_to_exitcode(self.zygote.ended[pid])
        if self.zygote.gone:
            if pid is None and self.log.exists() and self.log.stat().st_size == 0:  # never forked: say why where it is read
                self.log.write_text("packcheck: the zygote ended before it forked this launch; its output (last lines):\n"
                                    + "\n".join(self.zygote.output().splitlines()[-40:]))
            return -signal.SIGKILL
        return None

    def wait(self, seconds: float) -> int | None:
        deadline = time.monotonic() + seconds
        while (status := self.poll()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return status

    def kill(self, pid_files: list[Path]) -> int | None:
        """SIGKILL the warden's tree (the agent, the ranks and all they started) and every rank named in `pid_files`
        that is still the process that wrote it. A zygote that has not forked the warden yet is itself killed."""
        pid = self.pid
        if self.poll() is None:
            if pid is None:
                self.zygote.kill()
            else:
                kill_tree(pid, include_root=True)
        for path in pid_files:
            try:
                rank, started = json.loads(path.read_text())
            except (OSError, ValueError, TypeError):
                continue
            if start_time(rank) == started:
                _kill_group(rank)
        return self.wait(REAPED_SECONDS)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
