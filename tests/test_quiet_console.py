"""packcheck owns the console: engine processes start with third-party progress bars off (the
transformers "Loading weights" bar, hub and datasets downloads, any tqdm), unless the user set
the switch."""

from __future__ import annotations

import subprocess
import sys

from packcheck.harness.launch.launch import _environment
from packcheck.harness.launch.quiet import QUIET

PROBE = ("import sys; from transformers.utils import logging; from tqdm import tqdm; "
         "sys.stdout.write(f'{logging.is_progress_bar_enabled()} {tqdm(range(2), desc=\"Loading weights\").disable}')")


def _probe(env: dict) -> str:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True).stdout


def test_engine_processes_start_without_progress_bars(monkeypatch):
    for name in QUIET:
        monkeypatch.delenv(name, raising=False)
    env = _environment(world_size=1, device="cpu")
    assert {name: env[name] for name in QUIET} == QUIET
    assert _probe(env) == "False True", "transformers' bars and plain tqdm are off in an engine's environment"
    loud = {k: v for k, v in env.items() if k not in QUIET}
    assert _probe(loud) == "True False", "the control: without the switches both would draw"


def test_a_user_who_wants_the_bars_keeps_them(monkeypatch):
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    assert _environment(world_size=1, device="cpu")["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
