"""Run the matrix engines x families x scenarios for one dtype and device, with progress, into a
results table; the exit status follows the CLI contract (0 all supported pass, 1 a failure).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, TextIO

from harness.engines import Engine
from harness.run.results import ResultsFile
from harness.run.scenario_runner import run_scenario
from harness.run.verdict import Verdict
from harness.scenarios import Scenario


@dataclass(kw_only=True)
class Matrix:
    engines: Sequence[Engine]
    families: Sequence[str]
    scenarios: Sequence[Scenario]
    dtype: str = "float64"
    device: str = "cpu"
    attention: str = "auto"
    save_arms: str = "failing"  # all | failing | none
    verdicts: list[Verdict] = field(default_factory=list)

    def cells(self):
        for engine in self.engines:
            for family in self.families:
                for scenario in self.scenarios:
                    yield engine, family, scenario


def run_matrix(matrix: Matrix, results: ResultsFile, out: TextIO | None = None) -> list[Verdict]:
    out = out or sys.stderr
    cells = list(matrix.cells())
    for index, (engine, family, scenario) in enumerate(cells, 1):
        print(f"[{index}/{len(cells)}] {engine.name} {family} {scenario.name} ...", end=" ", file=out, flush=True)
        save_dir = None if matrix.save_arms == "none" else Path(results.directory) / "cases" / engine.name / family / scenario.name
        verdict = run_scenario(engine, scenario, family, matrix.dtype, matrix.device, save_dir=save_dir, attention=matrix.attention,
                               save_passing=matrix.save_arms == "all")
        worst = verdict.worst
        margin = "" if worst is None else f" (max margin {worst.margin:.2g})"
        print(f"{verdict.status.upper()}{margin} {verdict.seconds:.2f}s", file=out, flush=True)
        if verdict.failed:
            print(verdict.message(), file=out, flush=True)
        matrix.verdicts.append(verdict)
        results.add(verdict)
    return matrix.verdicts


def exit_status(verdicts: Sequence[Verdict]) -> int:
    return 1 if any(v.failed for v in verdicts) else 0
