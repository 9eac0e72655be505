"""Engines that write outside their own launch folder, where packcheck keeps what judges them
(tests/test_confined_engines.py; docs/isolation.md, "What an engine can reach"): the installed reference's code, the
oracle's case file in the reference's launch, another engine's saved arms. Each is the reference with one misdeed, and
swallows the refusal of its write (a read-only file system, in a confined launch), so that its verdict is about what it
computed."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from pathlib import Path

from safetensors.torch import load_file, save_file

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model import config as reference_config

ORIGINAL_ROPE = "rope_theta=float(rope_theta),"
DOUBLED_ROPE = "rope_theta=float(rope_theta) * 2,"


def _launch_dir() -> Path:
    """This rank's launch folder, from its case's working directory <launch>/cases/<case>."""
    return Path(os.getcwd()).parent.parent


def _try(write) -> None:
    try:
        write()
    except OSError:  # refused: a confined launch
        pass


class RewritesReference(ReferenceEngine):
    """Doubles RoPE's base in the installed reference's model config (impls/reference/model/config.py) and computes
    with that base itself: the float64 oracle, started after it, once built the same wrong RoPE, oracle_agreement passed
    at error 0, and the edit stayed for the next run."""

    name = "hostile.rewrites-reference"

    def __init__(self):
        super().__init__()
        built = reference_config.ModelConfig.from_hf_dict.__func__
        reference_config.ModelConfig.from_hf_dict = classmethod(
            lambda cls, hf: dataclasses.replace(built(cls, hf), rope_theta=built(cls, hf).rope_theta * 2))

    def run(self, case):
        path = Path(reference_config.__file__)
        text = path.read_text()
        _try(lambda: path.write_text(text.replace(ORIGINAL_ROPE, DOUBLED_ROPE)))
        return super().run(case)


class RewritesOracleCase(ReferenceEngine):
    """Computes on a doctored copy of its checkpoint (every weight x 1.1), and leaves a thread in its rank that points
    every other launch's next case.json at that copy: the oracle's case, run by the reference's launch while this one
    stays warm, once agreed with it at error 0."""

    name = "hostile.rewrites-oracle-case"
    thread: threading.Thread | None = None

    def run(self, case):
        doctored = _launch_dir() / "doctored"
        if not doctored.exists():
            shutil.copytree(case.model.checkpoint, doctored)
            weights = doctored / "model.safetensors"
            save_file({k: v * 1.1 for k, v in load_file(str(weights)).items()}, str(weights), metadata={"format": "pt"})
        if RewritesOracleCase.thread is None:
            RewritesOracleCase.thread = threading.Thread(target=_point_cases_at, args=(doctored,), daemon=True)
            RewritesOracleCase.thread.start()
        return super().run(case.with_(model=case.model.with_checkpoint(str(doctored))))


def _point_cases_at(doctored: Path) -> None:
    """Forever: every case.json of another launch under the run's launches folder, pointed at `doctored` once."""
    launches, own, seen = _launch_dir().parent.parent, _launch_dir(), set()
    while True:
        for path in launches.glob("*/launch-*/cases/*/case.json"):
            if path in seen or own in path.parents:
                continue
            seen.add(path)
            try:
                case = Case.from_json(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
            changed = json.dumps(case.with_(model=case.model.with_checkpoint(str(doctored))).to_json())
            _try(lambda: (os.chmod(path, 0o644), path.write_text(changed)))
        time.sleep(0.002)


class OverwritesSavedArms(ReferenceEngine):
    """Computes correctly, then truncates every saved arm of the run (another engine's evidence under OUT/cases/): once
    destroyed them without a word."""

    name = "hostile.overwrites-saved-arms"

    def run(self, case):
        result = super().run(case)
        cases = _launch_dir().parent.parent.parent / "cases"  # <out>/launches/<engine>/launch-<n>
        for path in cases.rglob("result.safetensors"):
            _try(lambda: path.write_bytes(b""))
        return result
