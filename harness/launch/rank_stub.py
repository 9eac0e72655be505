"""The command torch elastic starts for each rank: `python -I -S .../rank_stub.py -m packcheck.harness.launch.worker JOB`.

It does not run the rank itself. It asks its launch's root (harness/launch/launch_root.py), a fork of the pool's zygote
with torch and packcheck already imported, to fork the rank with this process's arguments, environment, working
directory and standard streams, and then stands in for it towards the agent: it forwards the signals the agent sends
(to the rank's process group, as the agent would have sent them to the rank's) and exits as the rank did, with its
status or by its signal. If it is itself killed (the agent's SIGKILL after its grace), the root sees its connection
close and kills the rank. So the agent supervises what looks to it like the ranks it started, and a rank costs a fork
instead of an interpreter importing torch (docs/architecture.md, "Launches forked from a zygote").

Standard library only and no package import, so that it starts in milliseconds; the launch root and the zygote use its
message framing (`send`, `receive`): one JSON object per datagram of a SOCK_SEQPACKET unix socket, with file
descriptors beside it where there are any.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys

SCRIPT = __file__
ROOT_ADDRESS = "PACKCHECK_LAUNCH_ROOT"  # the abstract unix socket the launch root listens on, set for the agent's children
MAX_MESSAGE = 1 << 20  # an environment and a command line fit many times over
MAX_FDS = 8
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        sock.send(data)


def receive(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """The next message and the descriptors sent with it; (None, []) once the other end has closed."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds


def exit_as(status: int) -> None:
    """End this process as a process with wait status `status` ended: its exit code, or its signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect("\0" + os.environ[ROOT_ADDRESS])
    except (KeyError, OSError) as err:
        sys.stderr.write(f"packcheck rank stub: no launch root to fork the rank ({err}); it runs only under a packcheck launch\n")
        os._exit(1)
    rank, pending = None, []

    def forward(sig, _frame):
        if rank is None:  # not forked yet: sent once it is
            pending.append(sig)
            return
        try:
            os.killpg(rank, sig)
        except (ProcessLookupError, PermissionError):
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    send(sock, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}, [0, 1, 2])
    message, _ = receive(sock)
    if message is None:  # the root is gone: so is the launch
        os._exit(1)
    rank = message["pid"]
    for sig in pending:
        forward(sig, None)
    message, _ = receive(sock)
    exit_as(message["status"] if message is not None else signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1:])
