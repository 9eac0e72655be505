"""The test session's fork server: the `packcheck` and `pytest` processes the tests start, forked from one process
that has imported torch, packcheck and pytest once. `python tests/fork_server.py LIFELINE_FD LISTENER_FD`, started by
conftest.py through tests/forked.py (whose `python` is the command a test runs).

A test that runs `packcheck run` or `pytest --pyargs packcheck.conformance` as a user's CI does (a process, its exit
status, its output, the files it leaves) paid a fresh interpreter importing torch and packcheck for it: about 3.5 s
of CPU, some forty times in the default tests. Here the process is asked for as launches ask their warden for a
rank: tests/forked.py runs harness/launch/rank_stub.py, which sends this server its arguments, environment, working
directory and standard streams, stands in for the forked process (forwarding signals, exiting as it did) and, killed,
has it killed. A fork is given what a fresh interpreter would have had (harness/launch/forked.py), its atexit
handlers run at its end, and an uncaught KeyboardInterrupt ends it by SIGINT; the one difference it can see is that
the modules it would have imported are imported already. What only an interpreter's start reads (harness/launch/zygotes.py `key`: a PYTHON* setting,
LD_PRELOAD, a variable torch or a library reads as it is imported) cannot be given to a fork: a request whose
environment differs from the server's there runs a fresh interpreter instead (exec'd in the fork), as before.

The tests of the entry point itself (signals at start-up, kill -9 of the harness, what a bare command imports) start
fresh interpreters on purpose, not through here.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import selectors
import signal
import socket
import struct
import sys
import traceback

from packcheck.harness.launch.forked import become, follow_pythonpath, fork, run_module
from packcheck.harness.launch.process_tree import kill_tree, set_name
from packcheck.harness.launch.rank_stub import ROOT_ADDRESS, exit_as, receive, send
from packcheck.harness.launch.zygotes import per_launch

# what `packcheck run` and a conformance pytest run import before their first launch (their zygote's preload included);
# not a module pytest would rewrite as it loads it as a plugin (hypothesis, which packcheck.conformance.plugin imports):
# found imported, it warns in the run's output that it cannot
PRELOAD = ("torch", "torch.distributed", "torch.distributed.launcher.api", "torch._dynamo", "numpy", "safetensors.torch",
           "packcheck.harness.launch.zygote", "packcheck.harness.launch.agent", "packcheck.harness.launch.worker",
           "packcheck.harness.launch.warden", "packcheck.harness.launch.pool", "packcheck.harness.cli.main",
           "packcheck.harness.cli.run_cmd", "packcheck.harness.run.session", "packcheck.harness.run.scenario_runner",
           "packcheck.harness.run_dir.results", "packcheck.harness.report", "packcheck.harness.scenarios",
           "packcheck.harness.engines", "packcheck.harness.provenance", "pytest")


def forkable(name: str) -> bool:
    """Whether variable `name` may differ between the server's environment and a fork's: read only as the process runs
    (a launch's per_launch settings, pytest's and pytest-xdist's PYTEST_*, the terminal's size, which a test session
    sets as it runs, CI, which pytest reads as it prints, and which a test sets to run as on a CI runner: forked here as
    there), or given to the fork where nothing preloaded is shadowed by it (PYTHONPATH: `shadowed`)."""
    return per_launch(name) or name.startswith("PYTEST_") or name in ("PYTHONPATH", "COLUMNS", "LINES", "CI")


def environment_key(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if not forkable(k)))


def shadowed(env: dict[str, str], cwd: str, preloaded: set[str]) -> list[str]:
    """What a fresh interpreter started in `cwd` with `env` would import from elsewhere than the server did: a preloaded
    top-level package or module found in its working directory or a PYTHONPATH entry (another packcheck tree, say)."""
    roots = [cwd, *(os.path.join(cwd, p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return [os.path.join(root, name) for root in roots for name in preloaded
            if os.path.exists(os.path.join(root, name)) or os.path.exists(os.path.join(root, name + ".py"))]


class ForkServer:
    def __init__(self, lifeline: int, listener: int, started: dict[str, str], imports_set: dict[str, str]):
        self.key = environment_key(started)  # as the interpreter started, before the preload
        self.imports_set = imports_set  # what the preload set in the environment: a fresh interpreter's imports would too
        self.listener = socket.socket(fileno=listener)  # bound and listening already (tests/forked.py); only this user may ask
        self.lifeline = lifeline
        self.wakeup_read, self.wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # seen through the wakeup descriptor, acted on in the loop
        self.selector = selectors.DefaultSelector()
        for source in (self.listener, self.wakeup_read, lifeline):
            self.selector.register(source, selectors.EVENT_READ)
        self.children: dict[int, socket.socket] = {}  # a fork's pid -> the connection of its stand-in
        self.forks = self.fresh = 0
        self.preloaded = {name.split(".")[0] for name in sys.modules} - set(sys.builtin_module_names)

    def serve(self) -> None:
        """Until the test session that started it ends (its lifeline closes); then every fork's tree is killed."""
        while True:
            for selected, _ in self.selector.select():
                if selected.fileobj is self.listener:
                    self._accept()
                elif selected.fileobj == self.wakeup_read:
                    os.read(self.wakeup_read, 1024)
                    self._reap()
                elif selected.fileobj == self.lifeline:
                    for child in self.children:
                        kill_tree(child, include_root=True)
                    print(f"fork server: {self.forks} forks, {self.fresh} fresh interpreters", flush=True)
                    return
                else:
                    self._stand_in_closed(selected.fileobj)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        message, fds = receive(conn) if uid == os.getuid() else (None, [])
        if message is None or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        env = {k: v for k, v in message["env"].items() if k != ROOT_ADDRESS}  # the stand-in's, not the process's
        # a value the preload set itself is what the fork's imports have already done (a test process that imported
        # torch._dynamo passes on the TORCHINDUCTOR_CACHE_DIR it set)
        as_started = {k: v for k, v in env.items() if self.imports_set.get(k) != v}
        differs = sorted({k for k, _ in set(environment_key(as_started)) ^ set(self.key)})
        elsewhere = shadowed(env, message["cwd"], self.preloaded)
        forked = not differs and not elsewhere
        if forked:
            env = {**self.imports_set, **env}
        else:
            print(f"a fresh interpreter for {message['argv'][:2]}: its environment differs in {differs}, it would import "
                  f"{elsewhere[:3]} from elsewhere", flush=True)
        close = (conn.fileno(), self.listener.fileno(), self.wakeup_read, self.wakeup_write, self.lifeline,
                 *(c.fileno() for c in self.children.values()))
        child = fork(lambda: self._start(message["argv"], env, message["cwd"], fds, close, forked))
        for fd in fds:
            os.close(fd)
        self.forks, self.fresh = self.forks + forked, self.fresh + (not forked)
        self.children[child] = conn
        self.selector.register(conn, selectors.EVENT_READ)
        send(conn, {"pid": child})

    @staticmethod
    def _start(argv: list[str], env: dict[str, str], cwd: str, streams: list[int], close: tuple[int, ...], forked: bool) -> None:
        """In the fork: the process asked for, as a fresh `python ARGV` would start (or that interpreter itself)."""
        become(argv[1].rsplit(".", 1)[-1][:15] if len(argv) > 1 else "python", env, cwd, streams, close)
        if not forked:
            os.execve(sys.executable, [sys.executable, *argv], env)
        follow_pythonpath(env)
        try:
            run_module(argv)
        except KeyboardInterrupt:  # uncaught, it ends an interpreter by SIGINT (its exit status says so), after its report
            traceback.print_exc()
            atexit._run_exitfuncs()
            exit_as(signal.SIGINT)
        finally:
            atexit._run_exitfuncs()  # as an interpreter's end would (the zygotes of a `packcheck run`, closed and waited)

    def _stand_in_closed(self, conn: socket.socket) -> None:
        """The stand-in is gone before its process (killed by a test's timeout): so is the process, with its tree."""
        self.selector.unregister(conn)
        conn.close()
        for child, known in list(self.children.items()):
            if known is conn:
                del self.children[child]
                kill_tree(child, include_root=True)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                try:
                    send(conn, {"status": status})
                except OSError:
                    pass
                self.selector.unregister(conn)
                conn.close()


def main(argv: list[str]) -> None:
    lifeline, listener = int(argv[0]), int(argv[1])
    set_name("pc-test-forks")
    started = dict(os.environ)
    for module in PRELOAD:
        importlib.import_module(module)
    imports_set = {k: v for k, v in os.environ.items() if started.get(k) != v}  # torch._dynamo: TORCHINDUCTOR_CACHE_DIR
    gc.collect()
    gc.freeze()  # a fork's collections then walk only its own objects, and touch no page it shares with the server
    ForkServer(lifeline, listener, started, imports_set).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
