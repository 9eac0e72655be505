"""The warden of one launch: the process between the harness and the launch's agent, which sees that every process
the engine starts ends with the launch. `python .../warden.py COMMAND...` (COMMAND: the agent).

It makes itself a child subreaper (Linux, prctl PR_SET_CHILD_SUBREAPER): a process below it whose parent dies is
handed to it, not to init, so whatever a rank starts (a forked child, a double fork, a `setsid` daemon) stays in its
tree. It runs COMMAND and, when the launch ends, kills that whole tree (`kill_tree`) and reaps it:
- the agent exits (a closed launch, a failed one): whatever the ranks left running is killed;
- the harness signals it or dies, kill -9 included (the kernel sends it SIGTERM then: PR_SET_PDEATHSIG).
It exits with the agent's status (dying of the agent's signal, if the agent died of one).

Standard library only and no package import: it runs as a script, starts in milliseconds, and never runs engine
code, so it is not where an engine can wedge. The harness kills the same tree, this process included, when the
launch stops making progress (harness/launch/guard.py). What no warden covers: docs/isolation.md.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
PARENT_PID = "PACKCHECK_PARENT_PID"  # as exit_status.PARENT_PID: the pid of the process that started this one
ORPHANED = 90  # as exit_status.ORPHANED: the harness was gone before this process could ask to die with it
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
SCRIPT = __file__  # run as a script, not with -m: no package import, so no engine code and no torch


def descendants(root: int) -> set[int]:
    """Every live process below `root` (by the parent pids of /proc/<pid>/stat), zombies included."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        ppid = int(text[text.rindex(b")") + 2:].split()[1])  # the name in parentheses may hold spaces
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root: int, include_root: bool = False) -> int:
    """SIGKILL every process below `root` (and `root` itself with `include_root`); returns how many. Each is stopped
    first (SIGSTOP), and the tree looked at again until a look finds no new process: a stopped process cannot fork, so
    none escapes between the look and the kill. Reparenting inside the tree (to a subreaper in it) keeps a process in it."""
    stopped: set[int] = set()
    while True:
        found = (descendants(root) | ({root} if include_root else set())) - stopped
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    return len(stopped)


def adopt_orphans() -> None:
    """Make the calling process (the harness of `packcheck run`) a subreaper too: a process whose warden died under it
    (killed by a person, the OOM killer or the engine itself) is handed to the harness, which ends it with the run."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def end_orphans() -> int:
    """Kill and reap every process still below the caller (the run is over: no launch is live); returns how many."""
    killed = kill_tree(os.getpid())
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return killed


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value)
    except (OSError, AttributeError):  # not Linux: no subreaper; the guard's kill_tree is all there is
        pass


def main(command: list[str]) -> int:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    expected = os.environ.get(PARENT_PID, "")
    if expected.isdigit() and os.getppid() != int(expected):
        return ORPHANED
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, *STOPS})  # taken with sigwait below, never as handlers
    agent = os.posix_spawn(command[0], command, {**os.environ, PARENT_PID: str(os.getpid())}, setsigmask=(),
                           setsigdef=(signal.SIGCHLD, *STOPS))
    status = None
    while status is None:
        info = signal.sigwaitinfo({signal.SIGCHLD, *STOPS})
        if info.si_signo != signal.SIGCHLD:
            break
        status = _reap(agent)
    kill_tree(os.getpid())
    while True:  # every process of the tree, now killed, reaped (they were all handed to this subreaper)
        try:
            pid, raw = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == agent and status is None:
            status = raw
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these two cannot be caught, so need no reset
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status) if status is not None else 128 + signal.SIGTERM


def _reap(agent: int) -> int | None:
    """Reap every child that has ended; the agent's raw wait status once it has."""
    found = None
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == agent:
            found = raw


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
