"""A process forked from the zygote's image, started as `python -m MODULE ARGS` would have started.

The zygote (harness/launch/zygote.py) has imported torch and packcheck's launch code once; the warden of each launch
and that launch's agent and ranks are forks of it. What a fresh interpreter would have had, a fork is given here:
signal handlers and mask as Python sets them at start-up, a session of its own, the standard streams, working
directory and environment it was asked for (the thread count set from OMP_NUM_THREADS, which OpenMP and MKL read as
torch is imported; torch reads the rest late: the CPU kernel path at the first operation, NCCL's at its start), a fresh seed for numpy's global generator (`random` reseeds itself in a fork), and the module run
as `__main__` with its arguments in `sys.argv`. What only an interpreter's start reads (PYTHON* variables, LD_PRELOAD,
the import path) cannot be given to a fork: the pool keeps a zygote per such environment (zygote.py `key`).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback
from typing import Callable, NoReturn

from packcheck.harness.launch.process_tree import set_name

# what the zygote and a warden catch, handed back to their defaults in a child (SIGINT: Python's KeyboardInterrupt)
CAUGHT = (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def fork(child: Callable[[], object]) -> int:
    """Fork; the child runs `child` and ends with os._exit (it never returns into the caller's code)."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            child()
        except SystemExit as done:
            status = _exit_code(done.code)
        except BaseException:  # noqa: BLE001 - as Python reports an uncaught exception, then exit 1
            traceback.print_exc()
        finally:
            _flush()
            os._exit(status)
    return pid


def become(name: str, env: dict[str, str], cwd: str, streams: list[int] | None = None, close: tuple[int, ...] = ()) -> None:
    """In a fresh fork: the process name `name` (what `ps` shows), the signals Python starts with, its own session,
    `streams` as stdin, stdout and stderr (each closed after), the other descriptors in `close` closed, `cwd` and `env`."""
    set_name(name)
    signal.set_wakeup_fd(-1)
    for sig in CAUGHT:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.setsid()
    for fd in close:
        _close(fd)
    if streams is not None:
        for target, fd in enumerate(streams):
            os.dup2(fd, target)
        for fd in set(streams) - {0, 1, 2}:
            _close(fd)
    os.chdir(cwd)
    sys.path[0] = cwd  # `python -m`'s first import root: the directory it started in (the zygote's may differ)
    os.environ.clear()
    os.environ.update(env)
    threads = env.get("OMP_NUM_THREADS") or env.get("MKL_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        # read by OpenMP and MKL when torch is imported, in the zygote (which starts without them): said again here
        sys.modules["torch"].set_num_threads(int(threads))
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()  # a fresh interpreter's global generator is seeded afresh


def follow_pythonpath(env: dict[str, str]) -> None:
    """The import path a fresh interpreter started with `env` would have: its PYTHONPATH's entries right after the first
    (the working directory, set by `become`), ahead of the rest."""
    roots = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:] = roots + [p for p in sys.path[1:] if p not in roots]


def run_module(argv: list[str]) -> NoReturn:
    """Run `argv` (`-m MODULE ARGS...`, the only form a fork can take) as `python -m` would, then exit."""
    if len(argv) < 2 or argv[0] != "-m":
        sys.stderr.write(f"packcheck: a forked process runs `-m MODULE ARGS...`, not {argv!r}\n")
        os._exit(2)
    sys.argv = [argv[1], *argv[2:]]  # run_module puts the module's file first, as `python -m` does
    sys.modules.pop(argv[1], None)  # preloaded: as in a fresh `python -m`, the module is only __main__
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream: nothing more to say
            pass


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
