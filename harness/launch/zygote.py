"""The zygote: a process with torch and packcheck's launch code imported once, from which every launch's processes are
forked. `python -m packcheck.harness.launch.zygote FD`, started by the harness (harness/launch/zygotes.py).

Start-up of an engine process was an interpreter importing torch (about 1.5 s of CPU, 2 s under load) for the agent
and for every rank: a world-1 launch paid it twice, a world-4 launch five times, most of the CPU of the test suite
(docs/architecture.md, "Launches forked from a zygote"). Forked from the zygote, a launch's warden, agent and ranks
start with all of that in memory and pay a fork each; torch elastic still starts and supervises every rank
(harness/launch/rank_stub.py). The zygote never runs engine code and no torch operation: it is single-threaded (but
for the idle thread numpy's BLAS keeps, which handles forks), so no lock is held at a fork. What a fork is given that
a fresh interpreter would have had: harness/launch/forked.py.

It serves `launch` requests on FD (a socket pair with the harness), forking a warden for each
(harness/launch/warden.py) and saying `started` with its pid and how the warden confined the launch (told through a
pipe before the warden forks anything: harness/launch/confine.py), then `ended` with its wait status once reaped. It is a
child subreaper: the orphans of a warden killed with -9 come to it, and are killed when the harness asks
(`end_orphans`, as a pool closes) and when it ends, which is when the harness closes its end. It dies with the process that started it (PR_SET_PDEATHSIG: SIGTERM, so it kills its tree
first), and its wardens die with it, each killing its launch's tree.
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import selectors
import signal
import socket
import sys

from packcheck.harness.launch import exit_status
from packcheck.harness.launch.forked import fork
from packcheck.harness.launch.process_tree import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, children, kill_tree, prctl, set_name
from packcheck.harness.launch.rank_stub import receive, send

# imported before the first fork: what every warden, agent and rank imports (engines are imported by the ranks themselves);
# torch._dynamo with it: DDP and FSDP import it when they wrap a model, and AdamW when it is built (1.8 s of CPU a rank on
# the CI machine, paid here once per harness process)
PRELOAD = ("torch", "torch.distributed", "torch.distributed.launcher.api", "torch._dynamo", "packcheck.harness.launch.agent",
           "packcheck.harness.launch.worker", "packcheck.harness.launch.warden")
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
SAID_SECONDS = 10.0  # a warden's confinement is a handful of system calls


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # not SIGKILL: it kills what is below it first
    parent = os.environ.get(exit_status.PARENT_PID, "")
    if parent.isdigit() and os.getppid() != int(parent):
        return exit_status.ORPHANED
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    set_name("pc-zygote")
    for module in PRELOAD:
        importlib.import_module(module)
    from packcheck.harness.launch import warden

    wakeup_read, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wakeup_write)
    for sig in (signal.SIGCHLD, *STOPS):
        signal.signal(sig, lambda *_: None)  # seen through the wakeup descriptor, acted on below
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wakeup_read, selectors.EVENT_READ)
    wardens: set[int] = set()
    me = os.getpid()
    running = True
    while running:
        for selected, _ in selector.select():
            if selected.fileobj is sock:
                message, fds = receive(sock)
                if message is None:  # the harness is done with this zygote (or gone)
                    running = False
                    break
                if "end_orphans" in message:
                    for orphan in set(children().get(me, ())) - wardens:
                        kill_tree(orphan, include_root=True)
                    continue
                (log,) = fds
                # what the zygote holds goes to the permanent generation: a collection in a fork (accelerate's
                # free_memory runs one per training call: 0.18 s each with transformers imported) then walks only the
                # fork's own objects, and touches no page it shares with the zygote
                gc.freeze()
                said_read, said_write = os.pipe2(os.O_CLOEXEC)
                pid = fork(lambda: warden.serve(me, message["argv"], message["env"], message["cwd"], log,
                                                        (sock.fileno(), wakeup_read, wakeup_write, said_read),
                                                        message.get("confine"), said_write))
                os.close(log)
                os.close(said_write)
                wardens.add(pid)
                send(sock, {"started": message["launch"], "pid": pid, "confined": _said(said_read)})
            else:
                signals = os.read(wakeup_read, 1024)
                if any(int(sig) in signals for sig in STOPS):
                    running = False
                for pid, status in _reaped():
                    if pid in wardens:
                        wardens.discard(pid)
                        try:
                            send(sock, {"ended": pid, "status": status})
                        except OSError:
                            pass
    kill_tree(me)
    for _ in _reaped(block=True):
        pass
    return 0


def _said(said_read: int) -> str:
    """What a fresh warden says of its confinement (harness/launch/confine.py), before it forks anything; a warden that
    says nothing within seconds is reported so, and the zygote goes on."""
    with os.fdopen(said_read, "rb") as said:
        ready, _, _ = select.select([said], [], [], SAID_SECONDS)
        text = said.read(4096).decode(errors="replace") if ready else ""
    return text or f"not confined: its warden said nothing of it within {SAID_SECONDS:g} s"


def _reaped(block: bool = False):
    """(pid, wait status) of every child that has ended (with `block`, of every child, waiting for each)."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


if __name__ == "__main__":
    exit_status.exit_now(main(sys.argv[1:]))
