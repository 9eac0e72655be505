"""The harness's end of the zygotes (harness/launch/zygote.py): every launch of this process is forked from one.

    guarded = launch(agent_argv, env, log)               # harness/launch/guard.py: the warden's pid, status, kill
    guarded.poll()                                      # None while the launch's warden runs, then its exit status
    end_orphans()                                       # a pool closed: what its launches' wardens left behind is killed

A process keeps one zygote for all its pools (at most `KEEP`, one per environment its launches need), started with its
first launch and ended when the process exits (`close_all`, at exit): a test session or a notebook that starts many
pools pays torch's import once, not once a pool. A zygote forks for launches whose environment is its own but for
what a fork can be given after it starts (`per_launch`: thread counts, the parent's pid, packcheck's own settings,
which it reads when it runs; harness/launch/forked.py, which also gives each fork its working directory as the first
entry of its import path, as `python -m` would). Any other difference (an import path, LD_PRELOAD, a PYTHON*
setting, read only when an interpreter starts or a library is imported) gets a zygote of its own.

The harness talks to each zygote over a socket pair, one JSON message a datagram: `launch` (with the log's
descriptor, and how to confine it: harness/launch/confine.py), answered by `started` (the warden's pid, and how it
was confined), then `ended` (its wait status) once the zygote has reaped
it; `end_orphans`, which kills every child of the zygote that is not a live warden (a process handed up to it when
its warden was killed).
"""

from __future__ import annotations

import atexit
import gc
import itertools
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import NoReturn

from packcheck.harness.launch.exit_status import PARENT_PID, children_environment
from packcheck.harness.launch.forked import become, follow_pythonpath, fork, run_module
from packcheck.harness.launch.guard import GuardedLaunch
from packcheck.harness.launch.lasting_thread import on_lasting_thread
from packcheck.harness.launch.process_tree import end_processes_below, kill_tree
from packcheck.harness.launch.rank_stub import receive, send

KEEP = 2  # zygotes a process keeps (each holds torch in memory); the least recently used one without launches goes first
CLOSE_SECONDS = 10.0


def per_launch(name: str) -> bool:
    """Whether a fork can be given variable `name` after it starts: set per launch, or read by packcheck when it runs.
    PYTEST_CURRENT_TEST is pytest's note of the test running, rewritten for every test: keyed on, it started a fresh
    zygote for nearly every launch of a test session (89 in 20 minutes of the default tests, ~5 s of CPU each)."""
    return name in (PARENT_PID, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTEST_CURRENT_TEST") or name.startswith("PACKCHECK_")


def key(env: dict[str, str]) -> tuple:
    """What a zygote must share with a launch it forks: the environment but for what is given per launch."""
    return tuple(sorted((k, v) for k, v in env.items() if not per_launch(k)))


class Zygote:
    """A zygote started with `env` (but for what is given per launch), its output in a temporary file: a fresh
    interpreter, or with `here`, a fork of this process (prefork)."""

    def __init__(self, env: dict[str, str], here: bool = False):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        handle, self.log = tempfile.mkstemp(prefix=f"packcheck-zygote-{os.getpid()}-", suffix=".log")
        env = children_environment({k: v for k, v in env.items() if not per_launch(k)})
        with os.fdopen(handle, "w") as log:
            if here:
                self.process = ForkedZygote(env, theirs, ours, log.fileno())
            else:
                # it dies with the thread that starts it (PR_SET_PDEATHSIG), so that thread must last: lasting_thread.py
                self.process = on_lasting_thread(lambda: subprocess.Popen(
                    [sys.executable, "-m", "packcheck.harness.launch.zygote", str(theirs.fileno())], env=env,
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True))
        theirs.close()
        self.sock = ours
        self.sock.setblocking(False)
        self.requests = itertools.count()
        self.started: dict[int, int] = {}  # request -> the warden's pid
        self.confined: dict[int, str] = {}  # request -> how its warden confined the launch (confine.py), or why not
        self.ended: dict[int, int] = {}  # a warden's pid -> its wait status
        self.gone = False

    @property
    def live(self) -> bool:
        """Whether a warden it forked is still running."""
        self.pump()
        return not self.gone and any(pid not in self.ended for pid in self.started.values())

    def launch(self, agent_argv: list[str], env: dict[str, str], log: Path, confine: dict | None = None) -> GuardedLaunch:
        """Fork a warden running `agent_argv` (with `env`, in the current directory, its output and the agent's in `log`),
        confined as `confine` says (harness/launch/confine.py; None: not at all)."""
        request = next(self.requests)
        with open(log, "w") as out:
            self._send({"launch": request, "argv": agent_argv, "env": env, "cwd": os.getcwd(), "confine": confine},
                       [out.fileno()])
        return GuardedLaunch(self, request, Path(log))

    def end_orphans(self) -> None:
        self._send({"end_orphans": True})

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
                self.confined[message["started"]] = message.get("confined", "")
            else:
                self.ended[message["ended"]] = message["status"]

    def close(self) -> None:
        """No more launches: the zygote kills what is left below it and ends (killed if it does not within seconds)."""
        self.sock.close()
        self.gone = True
        try:
            self.process.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
        Path(self.log).unlink(missing_ok=True)

    def kill(self) -> None:
        if self.process.poll() is None:
            kill_tree(self.process.pid, include_root=True)
        self.process.wait()
        self.gone = True

    def output(self) -> str:
        try:
            return Path(self.log).read_text(errors="replace")
        except OSError:
            return ""

    def _send(self, message: dict, fds: list[int] = ()) -> None:
        try:
            send(self.sock, message, fds)
        except OSError:
            self.gone = True


_zygotes: OrderedDict[tuple, Zygote] = OrderedDict()


def prefork(env: dict[str, str]) -> None:
    """Start the zygote of `env` now as a fork of this process, which has imported torch already: the zygote then
    imports only what torch does not (torch._dynamo, the launcher), not a whole interpreter's worth (about 3 s of CPU
    a process). Only from a process that is still single-threaded and has run no torch operation (the CLI, right after
    its arguments are read): a fork holds no lock, and the zygote dies with this thread (PR_SET_PDEATHSIG), which is
    the process's own main thread. Anywhere else the zygote starts as a fresh interpreter with the first launch."""
    wanted = key(env)
    if wanted not in _zygotes and threading.current_thread() is threading.main_thread() and threading.active_count() == 1:
        _zygotes[wanted] = Zygote(env, here=True)


def launch(agent_argv: list[str], env: dict[str, str], log: Path, confine: dict | None = None) -> GuardedLaunch:
    """A launch forked from the zygote of `env` (started now if there is none), confined as `confine` says."""
    wanted = key(env)
    zygote = _zygotes.get(wanted)
    if zygote is not None and (zygote.gone or zygote.process.poll() is not None):
        _zygotes.pop(wanted).kill()  # ended (killed from outside, or collected): it took its launches with it
        zygote = None
    if zygote is None:
        for old in [k for k, z in _zygotes.items() if not z.live][:max(0, len(_zygotes) + 1 - KEEP)]:
            _zygotes.pop(old).close()
        zygote = _zygotes[wanted] = Zygote(env)
    _zygotes.move_to_end(wanted)
    return zygote.launch(agent_argv, env, log, confine)


def end_orphans() -> None:
    """Each zygote kills the children it was handed that are not its live wardens (what a killed warden left running)."""
    for zygote in _zygotes.values():
        zygote.end_orphans()


@atexit.register
def close_all() -> None:
    """End every zygote of this process (each kills what is left below it)."""
    while _zygotes:
        _zygotes.popitem()[1].close()


def end_all() -> int:
    """A run is over (`packcheck run`, a subreaper): every process still below the caller is killed and reaped
    (process_tree.end_processes_below), the launches of every zygote and what they left behind included, but the live
    zygotes themselves, which are kept for the next run of this process; returns how many were killed. A process that
    runs `main()` again (a test session, a notebook) then forks its next launches from the same zygote: closing them
    here started a fresh one, importing torch again, after every in-process run (20 in the default tests)."""
    for wanted, zygote in list(_zygotes.items()):
        if zygote.gone or zygote.process.poll() is not None:
            _zygotes.pop(wanted).kill()  # ended already: dropped, so the registry never hands it out
    return end_processes_below(spare=frozenset(zygote.process.pid for zygote in _zygotes.values()))


class ForkedZygote:
    """The zygote as a fork of this process (prefork), with what the harness asks of a `subprocess.Popen`: its pid,
    `poll` and `wait`. The child starts as `python -m packcheck.harness.launch.zygote FD` would, in `env`
    (harness/launch/forked.py), its import path as that environment's PYTHONPATH makes it, its output in `log`."""

    def __init__(self, env: dict[str, str], theirs: socket.socket, ours: socket.socket, log: int):
        self.returncode: int | None = None
        self.pid = fork(lambda: self._serve(env, theirs.fileno(), ours.fileno(), log))

    @staticmethod
    def _serve(env: dict[str, str], theirs: int, ours: int, log: int) -> NoReturn:
        # the garbage this process left is collected now, while its descriptors are still its own: a file object
        # finalised later would close whatever descriptor the zygote had opened under the same number meanwhile
        gc.collect()
        gc.freeze()
        devnull = os.open(os.devnull, os.O_RDONLY)
        become("pc-zygote", env, os.getcwd(), streams=[devnull, log, log], close=(ours,))
        os.closerange(3, theirs)  # what this process had open (an --out lock, a log): not the zygote's to hold
        os.closerange(theirs + 1, os.sysconf("SC_OPEN_MAX"))
        follow_pythonpath(env)
        run_module(["-m", "packcheck.harness.launch.zygote", str(theirs)])  # as the fresh interpreter would

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (a sweep of everything below this process)
                self.returncode = -9
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["pc-zygote"], timeout)
            time.sleep(0.01)
        return self.returncode
