"""A signal in the CLI's first seconds (while it imports torch) ends as one later does: one line, exit 2 (issue 49
item 2: a KeyboardInterrupt traceback and exit 130 for SIGINT, a silent exit 143 for SIGTERM). The signal is sent
by the process to itself at the moment the CLI starts importing torch, so the moment is the same on every machine;
the CLI is the real entry point (`python -m packcheck.harness.cli.main`), run by runpy. No torch is imported: a
fraction of a second each."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

SIGNAL_AT_TORCH = """
import importlib.abc, os, runpy, signal, sys

SIGNAL = getattr(signal, sys.argv[1])

class SignalAtTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIGNAL)
        return None

sys.meta_path.insert(0, SignalAtTorch())
sys.argv = ["packcheck", *sys.argv[2:]]
runpy.run_module("packcheck.harness.cli.main", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_cli_imports_torch_is_one_line_and_exit_2(tmp_path, sig):
    done = subprocess.run([sys.executable, "-c", SIGNAL_AT_TORCH, sig.name, "run", "--engine", "reference", "--family", "llama",
                           "--scenario", "packed_vs_unpacked", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0].startswith(f"packcheck run: interrupted ({sig.name}) during start-up"), lines[0]


@pytest.mark.parametrize("command", [["list", "engines"], ["explain", "packed_vs_unpacked"]], ids=["list", "explain"])
def test_a_signal_while_a_listing_command_imports_torch_is_one_line_and_exit_2(command):
    """`list engines` and `explain` import torch after start-up (the parser does not): the signal is one line there too."""
    done = subprocess.run([sys.executable, "-c", SIGNAL_AT_TORCH, "SIGINT", *command], capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0] == f"packcheck {command[0]}: interrupted (SIGINT)", lines[0]
