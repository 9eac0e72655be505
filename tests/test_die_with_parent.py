"""A launch's processes die with the process that started them, also when it died before they asked
(harness/launch/exit_status.py): a kill -9 of the harness while a launch starts must leave no agent or rank behind."""

from __future__ import annotations

import os
import subprocess
import sys

from packcheck.harness.launch.exit_status import ORPHANED, PARENT_PID
from tests.machine_load import stretched

ASKS = "from packcheck.harness.launch import exit_status; exit_status.die_with_parent(); print('alive')"


def started_with(parent: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PARENT_PID}
    if parent is not None:
        env[PARENT_PID] = parent
    return subprocess.run([sys.executable, "-c", ASKS], env=env, capture_output=True, text=True, timeout=stretched(120))


def test_a_process_whose_parent_is_alive_runs_on():
    done = started_with(str(os.getpid()))
    assert (done.returncode, done.stdout.strip()) == (0, "alive"), done.stderr


def test_a_process_whose_parent_died_before_it_asked_exits_at_once():
    # its parent is this test, not the process named: as if the harness had died and the process been handed on
    done = started_with(str(os.getppid()))
    assert (done.returncode, done.stdout) == (ORPHANED, ""), done.stderr


def test_a_process_not_started_by_a_launch_is_left_alone():
    done = started_with(None)  # torchrun or a scheduler started the rank: nothing to compare with
    assert (done.returncode, done.stdout.strip()) == (0, "alive"), done.stderr
