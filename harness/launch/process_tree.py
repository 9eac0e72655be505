"""Process trees on Linux, from /proc: the descendants of a process, killing a tree whole, and a subreaper's orphans.

The warden of each launch (harness/launch/warden.py) kills its tree with these when the launch ends, the harness's
guard when a launch stops making progress, and `packcheck run` whatever was handed up to it. Standard library only:
cheap to import anywhere.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG, PR_SET_NAME, PR_SET_CHILD_SUBREAPER = 1, 15, 36


def children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (from /proc/<pid>/stat), zombies included."""
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        ppid = int(text[text.rindex(b")") + 2:].split()[1])  # the name in parentheses may hold spaces
        found.setdefault(ppid, []).append(int(entry))
    return found


def descendants(root: int) -> set[int]:
    """Every live process below `root`, zombies included."""
    below = children()
    found, todo = set(), [root]
    while todo:
        for child in below.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root: int, include_root: bool = False, spare: frozenset[int] = frozenset()) -> int:
    """SIGKILL every process below `root` (and `root` itself with `include_root`) but those in `spare`, whose own
    descendants are killed all the same; returns how many. Each is stopped first (SIGSTOP), and the tree looked at again
    until a look finds no new process: a stopped process cannot fork, so none escapes between the look and the kill.
    Reparenting inside the tree (to a subreaper in it) keeps a process in it. A spared process must not fork meanwhile
    (a zygote forks only when the caller asks it to)."""
    stopped: set[int] = set()
    while True:
        found = (descendants(root) | ({root} if include_root else set())) - stopped - spare
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
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def end_processes_below(spare: frozenset[int] = frozenset()) -> int:
    """Kill and reap every process still below the caller but `spare` (the run is over: no launch is live); returns how many."""
    killed = kill_tree(os.getpid(), spare=spare)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return killed


def prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value)
    except (OSError, AttributeError):  # not Linux: no subreaper; the guard's kill_tree is all there is
        pass




def set_name(name: str) -> None:
    """The calling process's name as `ps`, `top` and /proc/PID/comm show it (Linux: at most 15 bytes): what a process
    forked from the zygote is, where its command line still names the zygote."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22), or None if there is no such
    process: with its pid, it names one process, never a later one that was given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    return int(text[text.rindex(b")") + 2:].split()[19])


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie its parent has not collected yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: whether the pid exists at all
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
