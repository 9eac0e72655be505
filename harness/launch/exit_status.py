"""How the processes of a launch end: exit statuses of a rank, distinct from anything Python or a
signal produces (so that the agent's failure record says why a rank ended even when its report
file is missing), and dying with the process that started them."""

import ctypes
import os
import signal
import sys

RANK_TIMED_OUT = 86  # the watchdog fired: this rank exceeded the case's timeout
PEER_FAILED = 87  # another rank raised or timed out in this case; this one stopped with it
ENGINE_RAISED = 88  # engine.run raised (or rank 0 returned no StepResult) on this rank
STARTUP_FAILED = 89  # before the first case: process group, recorder or engine resolution
ORPHANED = 90  # the agent that started this rank is gone

MEANING = {
    RANK_TIMED_OUT: "timed out (watchdog)",
    PEER_FAILED: "stopped because another rank failed",
    ENGINE_RAISED: "the engine raised",
    STARTUP_FAILED: "failed at start-up",
    ORPHANED: "its launcher died",
}


def exit_now(status: int) -> None:
    """End the process without the interpreter's teardown of torch (about a second per process
    on a busy machine); for the agent and the ranks, whose results are already on disk."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


PARENT_PID = "PACKCHECK_PARENT_PID"  # the pid of the process that started this one, set by that process


def children_environment(env: dict[str, str]) -> dict[str, str]:
    """`env` for processes this one starts: they die with it (die_with_parent) knowing which process it is."""
    return {**env, PARENT_PID: str(os.getpid())}


def die_with_parent() -> None:
    """Linux: the kernel kills this process if its parent dies, even by SIGKILL (the agent with the
    harness, a rank with the agent); elsewhere the rank watchdog notices its agent is gone. A parent that
    died before this process asked (a kill -9 of the harness while a launch starts) is seen here: the
    process was handed to another parent, so it exits at once rather than run on as an orphan."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    expected = os.environ.get(PARENT_PID)
    if expected is not None and expected.isdigit() and os.getppid() != int(expected):
        exit_now(ORPHANED)
