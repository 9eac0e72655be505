"""The tests' fork server (tests/fork_server.py, tests/forked.py): a process forked for a test starts as a fresh
`python -m MODULE` would, but for the modules it finds imported; where that could differ (a variable read as torch is
imported, a package the process would import from elsewhere) it is a fresh interpreter; its exit status, signals and
death are its stand-in's, as the tests that run `packcheck` through it assume."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
import types

import pytest
import torch._dynamo  # noqa: F401 - sets TORCHINDUCTOR_CACHE_DIR here, as in a test worker: the requests carry it

from tests.forked import SERVER, STAND_IN, TESTS, ForkServer
from tests.machine_load import stretched
from tests.processes import processes_of

PROBE = """
import json, os, sys
started_with_torch = "torch" in sys.modules
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "main": __name__, "stdin": sys.stdin.read(),
                  "env": {k: os.environ.get(k) for k in ("PACKCHECK_PROBE", "PYTEST_PROBE")},
                  "threads": os.environ.get("OMP_NUM_THREADS"), "started_with_torch": started_with_torch}))
print("to stderr", file=sys.stderr)
if os.environ.get("PACKCHECK_PROBE") == "sleep":
    import time
    time.sleep(600)
sys.exit(int(os.environ.get("PACKCHECK_PROBE_EXIT", "0")))
"""


@pytest.fixture(scope="module")
def server():
    started = ForkServer()
    yield started
    started.stop()


@pytest.fixture
def probe_dir(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def run(command: list[str], cwd, server: ForkServer | None, stdin: str = "", **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, SERVER: server.address if server else "", **env}
    return subprocess.run(command, cwd=cwd, env=environment, input=stdin, capture_output=True, text=True, timeout=stretched(120))


def test_a_forked_process_starts_as_a_fresh_interpreter_would(server, probe_dir):
    assert "TORCHINDUCTOR_CACHE_DIR" in os.environ, "the preload's own setting, passed on: still forked"
    fresh = run([sys.executable, "-m", "probe", "a b", "--x"], probe_dir, None, stdin="in", PACKCHECK_PROBE="1", PYTEST_PROBE="2", PACKCHECK_PROBE_EXIT="3")
    forked = run([*STAND_IN, "-m", "probe", "a b", "--x"], probe_dir, server, stdin="in", PACKCHECK_PROBE="1", PYTEST_PROBE="2", PACKCHECK_PROBE_EXIT="3")
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (3, "to stderr\n")
    seen_fresh, seen_forked = json.loads(fresh.stdout), json.loads(forked.stdout)
    assert (seen_fresh.pop("started_with_torch"), seen_forked.pop("started_with_torch")) == (False, True), "not forked"
    assert seen_forked == seen_fresh
    assert seen_forked["argv"] == [str(probe_dir / "probe.py"), "a b", "--x"] and seen_forked["stdin"] == "in"


@pytest.mark.parametrize(("why", "env", "place"), [
    ("a variable read as torch is imported", {"ATEN_CPU_CAPABILITY": "default"}, None),
    ("another packcheck on the import path", {}, "packcheck"),
])
def test_a_process_the_preload_could_change_is_a_fresh_interpreter(server, probe_dir, why, env, place):
    if place:  # a folder named as a preloaded package, ahead of the installed one
        (probe_dir / "elsewhere" / place).mkdir(parents=True)
        env = {"PYTHONPATH": str(probe_dir / "elsewhere")}
    done = run([*STAND_IN, "-m", "probe"], probe_dir, server, **env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["started_with_torch"] is False, why


def test_an_uncaught_keyboard_interrupt_or_a_signal_ends_it_as_it_ends_an_interpreter(server, probe_dir):
    (probe_dir / "interrupted.py").write_text("raise KeyboardInterrupt\n")
    fresh = run([sys.executable, "-m", "interrupted"], probe_dir, None)
    forked = run([*STAND_IN, "-m", "interrupted"], probe_dir, server)
    assert forked.returncode == fresh.returncode == -signal.SIGINT
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "KeyboardInterrupt"
    sleeper = subprocess.Popen([*STAND_IN, "-m", "probe"], cwd=probe_dir, env={**os.environ, SERVER: server.address, "PACKCHECK_PROBE": "sleep"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert json.loads(sleeper.stdout.readline())["started_with_torch"] is True
    sleeper.send_signal(signal.SIGTERM)  # to the stand-in, which forwards it
    assert sleeper.wait(timeout=stretched(30)) == -signal.SIGTERM


def test_a_killed_stand_in_takes_its_process_with_it(server, probe_dir):
    sleeper = subprocess.Popen([*STAND_IN, "-m", "probe"], cwd=probe_dir, env={**os.environ, SERVER: server.address, "PACKCHECK_PROBE": "sleep"},
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert json.loads(sleeper.stdout.readline())["started_with_torch"] is True
    assert processes_of(probe_dir), "the forked probe runs in its folder"
    sleeper.kill()  # as subprocess.run's timeout does
    sleeper.wait()
    deadline = time.monotonic() + stretched(10)
    while processes_of(probe_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_of(probe_dir)


def test_a_forked_pytest_prints_what_a_fresh_one_prints(server):
    """A preloaded module pytest would rewrite (a plugin's, such as hypothesis's) makes a forked pytest warn that it
    cannot, a warnings summary a fresh one does not print, which the tests that read a pytest run's output would see."""
    collect = ["-m", "pytest", "-p", "no:cacheprovider", "conformance", "--engine", "reference", "--family", "llama",
               "--collect-only", "-q", "-W", "default"]
    fresh = run([sys.executable, *collect], TESTS.parent, None)
    forked = run([*STAND_IN, *collect], TESTS.parent, server)
    assert forked.returncode == fresh.returncode == 0, forked.stdout + forked.stderr
    assert without_timing(forked.stdout) == without_timing(fresh.stdout) and "warning" not in forked.stdout


def without_timing(output: str) -> str:
    return re.sub(r" in [0-9.]+s", "", output)


def test_the_session_server_outlives_the_end_of_an_in_process_run(probe_dir):
    """`packcheck run` called in the test process kills everything below it at its end but its zygotes (zygotes.py
    `end_all`): the session's server, started detached before any test ran, is not below it, so a single-process
    session's subprocess tests after such a run still fork. Last in this file: in a worker an earlier in-process run
    made a subreaper, the module's own server (started after it) is below it and ends here."""
    from packcheck.harness.launch.zygotes import end_all

    if not os.environ.get(SERVER):
        pytest.skip("PACKCHECK_TEST_FORK_SERVER is empty: the session's fork server is turned off")
    end_all()
    done = run([*STAND_IN, "-m", "probe"], probe_dir, types.SimpleNamespace(address=os.environ[SERVER]))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["started_with_torch"] is True
