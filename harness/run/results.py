"""The run's results table: results.json, rewritten after every verdict so a crash leaves a
partial but valid file.

Schema `packcheck.results/1` (documented in docs/results-schema.md):
    provenance: versions, device, git commit, command, time, seed
    verdicts:   one per engine x family x scenario x dtype x device (status, diagnosis, reproduce, ...)
    rows:       one per engine x family x scenario x dtype x arms x quantity x item x metric,
                with observed, threshold, margin, passed, where
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from packcheck.harness.run.verdict import Verdict

SCHEMA = "packcheck.results/1"
VERDICT_KEYS = ("engine", "family", "scenario", "dtype", "device", "attention")


def _finite(value):
    """JSON has no inf/NaN: write them as strings a reader maps back."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


class ResultsFile:
    def __init__(self, directory: Path, provenance: dict):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.provenance = provenance
        self.verdicts: list[Verdict] = []

    @property
    def path(self) -> Path:
        return self.directory / "results.json"

    def add(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        self.write()

    def rows(self) -> list[dict]:
        return [
            _finite({key: getattr(v, key) for key in VERDICT_KEYS} | c.to_json())
            for v in self.verdicts
            for c in v.comparisons
        ]

    def write(self) -> None:
        data = {
            "schema": SCHEMA,
            "provenance": self.provenance,
            "verdicts": [_finite(v.to_json()) for v in self.verdicts],
            "rows": self.rows(),
        }
        scratch = self.path.with_suffix(".json.tmp")
        scratch.write_text(json.dumps(data, indent=1))
        os.replace(scratch, self.path)


def arms_directory(run_dir: str | Path, engine: str, family: str, scenario: str) -> Path:
    """Where a run keeps each arm's case.json and result.* of one verdict: DIR/cases/<engine>/<family>/<scenario>."""
    return Path(run_dir) / "cases" / engine / family / scenario


def load_results(directory: str | Path) -> dict:
    path = Path(directory) / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: point at the --out directory of a `packcheck run`")
    data = json.loads(path.read_text())
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path} has schema {data.get('schema')!r}; this packcheck reads {SCHEMA!r}")
    return data
