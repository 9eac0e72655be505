"""How busy this machine is, for the tests that bound a duration.

A bound measured on an idle machine trips on a loaded one: CI on 2 cores at a load average near
100 ran every process ~50 times slower, and 14 tests of the default run failed on their timeouts
(issue 50). So a test states its bound as idle seconds and stretches it by the load: the 1-minute
load average per core, never below 1. A hang still fails (each bound stays finite), and a bound
that trips says the load it was stretched by.

    done = subprocess.run(command, timeout=stretched(120))
    assert elapsed < stretched(60), f"took {elapsed:.0f} s ({load_note()})"
"""

from __future__ import annotations

import os


def slowdown() -> float:
    """How many times slower than idle processes run here now: the 1-minute load average per core, at least 1."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def stretched(idle_seconds: float) -> float:
    """A bound measured on an idle machine, stretched by the load now (whole seconds, so messages read as given)."""
    return float(round(idle_seconds * slowdown()))


def load_note() -> str:
    """For a failure message: the load the bounds were stretched by."""
    return f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: bounds stretched x{slowdown():.1f}"
