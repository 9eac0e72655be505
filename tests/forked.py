"""`python` for the tests' `packcheck` and `pytest` subprocesses, forked from the session's fork server
(tests/fork_server.py) where conftest.py started one:

    subprocess.run(python("-m", "packcheck.harness.cli.main", "run", ...), ...)

The command is this file run as `python -I -S tests/forked.py -m MODULE ARGS`: it hands itself to the launches' stand-in
for a rank (harness/launch/rank_stub.py), which asks the server to fork `python -m MODULE ARGS` with this process's
environment, working directory and standard streams, forwards the signals it gets and exits as the fork did. Standard
library only, so that it starts in milliseconds. Without a server (a test run outside this repository's conftest, or
`PACKCHECK_TEST_FORK_SERVER= pytest ...`, set empty to rule the server out of a failure) the command is the fresh
interpreter itself.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = "PACKCHECK_TEST_FORK_SERVER"  # the fork server's abstract socket, set for the whole test session by conftest.py
TESTS = Path(__file__).resolve().parent
RANK_STUB = TESTS.parent / "harness" / "launch" / "rank_stub.py"


# a bare interpreter that starts `python ARGS...` as its child, its output going where the interpreter's errors go,
# prints the child's pid and exits: the child is orphaned
DETACH = ("import os, sys\npid = os.fork()\nif pid == 0:\n    os.dup2(2, 1)\n"
          "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\nprint(pid)\n")
STAND_IN = [sys.executable, "-I", "-S", __file__]  # this file as the command, followed by `-m MODULE ARGS`


def python(*argv: str) -> list[str]:
    """The command line that runs `python ARGV...` (`-m MODULE ARGS`), forked from the session's fork server if it has one."""
    return [*STAND_IN, *argv] if os.environ.get(SERVER) else [sys.executable, *argv]


class ForkServer:
    """A fork server (tests/fork_server.py) listening at `address` (what SERVER names for the commands `python` gives),
    until `stop`. The socket is bound and listening before the server starts, so a request made while it still imports
    torch waits for it rather than failing."""

    def __init__(self):
        self.address = address = f"packcheck-test-forks-{os.getpid()}-{secrets.token_hex(4)}"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind("\0" + address)
        listener.listen(64)
        lifeline, self.lifeline = os.pipe()  # the server ends when this end closes (this process gone, or `stop`)
        self.log = tempfile.NamedTemporaryFile(prefix="packcheck-test-forks-", suffix=".log", delete=False)
        # started detached (a fork of a bare interpreter, which exits at once): not below this process, where the end of
        # an in-process `packcheck run` (harness/launch/zygotes.py `end_all`) kills everything but its zygotes
        detach = subprocess.Popen([sys.executable, "-c", DETACH, str(TESTS / "fork_server.py"), str(lifeline), str(listener.fileno())],
                                  pass_fds=[lifeline, listener.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.log, start_new_session=True, text=True)
        self.pid = int(detach.stdout.readline())
        detach.wait()
        os.close(lifeline)
        listener.close()

    def stop(self, seconds: float = 30) -> str:
        """End the server (it kills what it forked that is still running); what it said: each fresh interpreter with
        why, then how many processes it forked."""
        from packcheck.harness.launch.process_tree import alive  # here: the stand-in (this file run with -I -S) has no packcheck

        os.close(self.lifeline)
        log = Path(self.log.name)
        deadline = time.monotonic() + seconds
        while "fork server:" not in log.read_text(errors="replace") and alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.log.close()
        said = log.read_text(errors="replace").strip()
        log.unlink(missing_ok=True)
        if "fork server:" in said:
            return said
        # killed before it was stopped: a test that ends everything below its process (zygotes.py `end_all`) in a
        # worker that an earlier in-process run made a subreaper, to which the detached server was reparented
        why = "was killed before it was stopped" if not alive(self.pid) else f"did not say how it ended within {seconds:g} s"
        return f"fork server: {why}: {said[-500:]}"


if __name__ == "__main__":
    # the stand-in's file on its own: importing it through its package would import torch
    spec = importlib.util.spec_from_file_location("rank_stub", RANK_STUB)
    stub = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stub)
    os.environ[stub.ROOT_ADDRESS] = os.environ[SERVER]
    stub.main(sys.argv[1:])
