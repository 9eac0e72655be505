"""The warden of one launch: the root of its process tree, which sees that every process the engine starts ends with
the launch, and the fork server of its agent and ranks. A fork of the pool's zygote (harness/launch/zygote.py), so
torch and packcheck's launch code are imported before it starts.

Before it forks anything it enters the launch's mount namespace, in which only the launch's own folder is writable of
what the harness protects (harness/launch/confine.py). It makes itself a child subreaper (Linux, prctl
PR_SET_CHILD_SUBREAPER): a process below it whose parent dies is handed to it, not to init, so whatever a rank starts (a
forked child, a double fork, a `setsid` daemon) stays in its tree. It forks the agent (`-m
packcheck.harness.launch.agent JOB`), and forks each rank when the agent's stand-in for it asks
(harness/launch/rank_stub.py: torch elastic starts the stand-in, the warden forks the rank, which is then a child of the
warden, not of the stand-in). When the launch ends it kills its whole tree (`kill_tree`) and reaps it:
- the agent exits (a closed launch, a failed one): whatever the ranks left running is killed;
- the harness signals it, or the zygote dies with the harness, kill -9 included (the kernel sends it SIGTERM then:
  PR_SET_PDEATHSIG).
It exits with the agent's status (dying of the agent's signal, if the agent died of one), which the zygote reports
to the harness. The harness kills the same tree, this process included, when the launch stops making progress
(harness/launch/guard.py). What no warden covers: docs/isolation.md.
"""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import socket
from typing import NoReturn

from packcheck.harness.launch.confine import enter
from packcheck.harness.launch.exit_status import ORPHANED, PARENT_PID
from packcheck.harness.launch.forked import become, fork, run_module
from packcheck.harness.launch.process_tree import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, kill_tree, prctl
from packcheck.harness.launch.rank_stub import ROOT_ADDRESS, exit_as, receive, send

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Warden:
    def __init__(self, agent_argv: list[str], env: dict[str, str]):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.address = f"packcheck-warden-{os.getpid()}-{secrets.token_hex(8)}"
        self.listener.bind("\0" + self.address)  # abstract: no file, no path length; who may ask is checked (_agent_child)
        self.listener.listen(64)
        self.wakeup_read, self.wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wakeup_write)
        for sig in (signal.SIGCHLD, *STOPS):
            signal.signal(sig, lambda *_: None)  # seen through the wakeup descriptor, acted on in the loop
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wakeup_read, selectors.EVENT_READ)
        self.ranks: dict[int, socket.socket] = {}  # a rank's pid -> the connection of its stand-in
        env = {**env, ROOT_ADDRESS: self.address, PARENT_PID: str(os.getpid())}
        self.agent = fork(lambda: self._start("pc-agent", env, os.getcwd(), None, agent_argv))

    def serve(self) -> int:
        """Until the agent ends or the warden is told to stop; then the tree is killed and reaped. The agent's status."""
        status, stopping = None, False
        while status is None and not stopping:
            for key, _ in self.selector.select():
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj == self.wakeup_read:
                    signals = os.read(self.wakeup_read, 1024)
                    stopping = any(int(sig) in signals for sig in STOPS)
                    status = self._reap()
                else:
                    self._stand_in_closed(key.fileobj)
        kill_tree(os.getpid())
        while True:  # every process of the tree, now killed, reaped (they were all handed to this subreaper)
            try:
                pid, raw = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == self.agent and status is None:
                status = raw
        return status if status is not None else (128 + signal.SIGTERM) << 8  # a raw wait status: "exited 143", as a shell says it

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:  # the stand-in went away while connecting
            return
        if not self._agent_child(conn):
            conn.close()
            return
        message, fds = receive(conn)
        if message is None or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        close = (conn.fileno(), *(c.fileno() for c in self.ranks.values()))
        env = {**message["env"], PARENT_PID: str(os.getpid())}  # the rank's parent is this warden, not the agent
        rank = fork(lambda: self._start(f"pc-rank{env.get('RANK', '')}", env, message["cwd"], fds, message["argv"], close))
        for fd in fds:
            os.close(fd)
        self.ranks[rank] = conn
        self.selector.register(conn, selectors.EVENT_READ)
        send(conn, {"pid": rank})

    def _agent_child(self, conn: socket.socket) -> bool:
        """Only a process the agent started (its stand-ins for the ranks) may ask for a fork, and only as this user."""
        pid, uid, _ = _peer(conn)
        if uid != os.getuid():
            return False
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            return False
        return int(text[text.rindex(b")") + 2:].split()[1]) == self.agent

    def _stand_in_closed(self, conn: socket.socket) -> None:
        """The agent's stand-in for a rank is gone before its rank (killed by the agent after its grace): so is the rank."""
        self.selector.unregister(conn)
        conn.close()
        for rank, known in list(self.ranks.items()):
            if known is conn:
                del self.ranks[rank]
                kill_tree(rank, include_root=True)

    def _reap(self) -> int | None:
        """Reap every child that has ended, telling each rank's stand-in how; the agent's raw wait status once it has."""
        found = None
        while True:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return found
            if pid == 0:
                return found
            if pid == self.agent:
                found = raw
            conn = self.ranks.pop(pid, None)
            if conn is not None:
                try:
                    send(conn, {"status": raw})
                except OSError:
                    pass
                self.selector.unregister(conn)
                conn.close()

    def _start(self, name: str, env: dict[str, str], cwd: str, streams: list[int] | None, argv: list[str],
               close: tuple[int, ...] = ()) -> None:
        """In a fork of this warden: the agent (streams: the warden's own) or a rank (streams: its stand-in's)."""
        become(name, env, cwd, streams, close + (self.listener.fileno(), self.wakeup_read, self.wakeup_write))
        run_module(argv)


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    import struct

    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def serve(zygote: int, agent_argv: list[str], env: dict[str, str], cwd: str, log: int, close: tuple[int, ...],
          plan: dict | None, said: int) -> NoReturn:
    """In a fresh fork of the zygote (pid `zygote`): become the warden of a launch whose agent runs `agent_argv`, its
    output and the agent's in `log`, and exit as the agent did. `close`: the zygote's own descriptors. First, while this
    process is single-threaded and nothing of the launch exists, it confines itself as `plan` says (confine.py) and
    writes how, or why not, to `said`, which the zygote reads."""
    try:  # first: `become` sets torch's thread count, which starts OpenMP's threads, and a user namespace needs one thread
        os.write(said, enter(plan or {"mode": "off"}).encode())
    finally:
        os.close(said)
    become("pc-warden", env, cwd, [0, log, log], close)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != zygote:  # the zygote died before this process could ask to die with it
        os._exit(ORPHANED)
    exit_as(Warden(agent_argv, dict(os.environ)).serve())

