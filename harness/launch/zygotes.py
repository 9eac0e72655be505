"""The harness's end of the zygotes (harness/launch/zygote.py): a pool starts one per environment its launches need,
and asks it to fork each launch's warden.

    zygotes = Zygotes(workdir)
    guarded = zygotes.launch(agent_argv, env, log)   # harness/launch/guard.py: the warden's pid, status, kill
    guarded.poll()                                  # None while the launch's warden runs, then its exit status
    zygotes.close()                                 # their launches are over: each kills what is left below it and ends

A zygote forks for launches whose environment and working directory are its own but for what a fork can be given
after it starts (`PER_LAUNCH`: thread counts, the parent's pid; harness/launch/forked.py); any other difference (an
import path, LD_PRELOAD, a PYTHON* setting, read only when an interpreter starts) gets a zygote of its own. The
harness talks to each over a socket pair, one JSON message a datagram: `launch` (with the log's descriptor),
answered by `started` (the warden's pid), and `ended` (its wait status) once the zygote has reaped it.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
from pathlib import Path

from packcheck.harness.launch.exit_status import PARENT_PID, children_environment
from packcheck.harness.launch.guard import GuardedLaunch
from packcheck.harness.launch.process_tree import kill_tree
from packcheck.harness.launch.rank_stub import receive, send

# set per launch and read by a fork after it starts (forked.py): a zygote serves launches that differ only in these
PER_LAUNCH = frozenset({PARENT_PID, "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
_numbers = itertools.count()


def key(env: dict[str, str], cwd: str) -> tuple:
    """What a zygote must share with a launch it forks: the environment but for PER_LAUNCH, and the directory (the
    first entry of a `python -m` process's import path)."""
    return cwd, tuple(sorted((k, v) for k, v in env.items() if k not in PER_LAUNCH))


class Zygote:
    """The harness's end: a zygote started with `env` in `cwd`, its output in WORKDIR/zygote-<pid>.log."""

    def __init__(self, workdir: Path, env: dict[str, str], cwd: str):
        workdir.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = workdir / f"zygote-{os.getpid()}-{next(_numbers)}.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "packcheck.harness.launch.zygote", str(workdir), str(theirs.fileno())],
                env=children_environment({k: v for k, v in env.items() if k not in PER_LAUNCH}), cwd=cwd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        theirs.close()
        self.sock = ours
        self.sock.setblocking(False)
        self.requests = itertools.count()
        self.started: dict[int, int] = {}  # request -> the warden's pid
        self.ended: dict[int, int] = {}  # a warden's pid -> its wait status
        self.gone = False

    def launch(self, agent_argv: list[str], env: dict[str, str], cwd: str, log: Path, world_size: int) -> GuardedLaunch:
        """Fork a warden running `agent_argv` (with `env`, in `cwd`, its output and the agent's in `log`) for a launch
        of `world_size` ranks."""
        request = next(self.requests)
        with open(log, "w") as out:
            try:
                send(self.sock, {"launch": request, "argv": agent_argv, "env": env, "cwd": cwd, "world_size": world_size},
                     [out.fileno()])
            except OSError:
                self.gone = True
        return GuardedLaunch(self, request, log)

    def pump(self) -> None:
        """Take every message the zygote has sent; note when it is gone."""
        while not self.gone:
            try:
                message, _ = receive(self.sock)
            except BlockingIOError:
                return
            except OSError:
                message = None
            if message is None:
                self.gone = True
            elif "started" in message:
                self.started[message["started"]] = message["pid"]
            else:
                self.ended[message["ended"]] = message["status"]

    def close(self) -> None:
        """No more launches: the zygote kills what is left below it and ends (killed if it does not within seconds)."""
        self.sock.close()
        self.gone = True
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            kill_tree(self.process.pid, include_root=True)
        self.process.wait()
        self.gone = True

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class Zygotes:
    """A pool's zygotes, one per `key` of the launches it starts (usually one), in `workdir`."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self._live: dict[tuple, Zygote] = {}

    def launch(self, agent_argv: list[str], env: dict[str, str], log: Path, world_size: int = 1) -> GuardedLaunch:
        """A launch of `world_size` ranks forked from the zygote of `env` and the current directory (started now if there
        is none)."""
        cwd = os.getcwd()
        zygote = self._live.get(key(env, cwd))
        if zygote is None or zygote.gone:
            if zygote is not None:
                zygote.kill()  # collected; it took its launches with it
            zygote = self._live[key(env, cwd)] = Zygote(self.workdir, env, cwd)
        return zygote.launch(agent_argv, env, cwd, log, world_size)

    def close(self) -> None:
        for zygote in self._live.values():
            zygote.close()
        self._live.clear()

    def kill(self) -> None:
        for zygote in self._live.values():
            zygote.kill()
        self._live.clear()
