"""Run the matrix engines x families x scenarios for one dtype and device, with progress, into a
results table; the exit status follows the CLI contract (0 all supported pass, 1 a failure).
An in-process arm runs under a watchdog: if it hangs, the verdict records every thread's stack,
the partial results and report are written, and the process exits 1 (a Python call cannot be
interrupted). Multi-process arms have per-rank watchdogs in the launcher and the run goes on.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TextIO

from packcheck.harness.engines import Engine
from packcheck.harness.run.results import ResultsFile, arms_directory
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.run.verdict import HANG, UNSUPPORTED, Verdict
from packcheck.harness.scenarios import Scenario


@dataclass(kw_only=True)
class Matrix:
    engines: Sequence[Engine]
    families: Sequence[str]
    scenarios: Sequence[Scenario]
    dtype: str = "float64"
    device: str = "cpu"
    attention: str = "auto"
    save_arms: str = "failing"  # all | failing | none
    timeout: float = 600.0  # seconds per verdict; 0 disables the watchdog
    verdicts: list[Verdict] = field(default_factory=list)

    def cells(self):
        for engine in self.engines:
            for family in self.families:
                for scenario in self.scenarios:
                    yield engine, family, scenario


def hang_verdict(matrix: Matrix, engine: Engine, family: str, scenario: Scenario, stacks: str) -> Verdict:
    return Verdict(
        engine=engine.name, family=family, scenario=scenario.name, dtype=matrix.dtype, device=matrix.device,
        attention=matrix.attention, status=HANG, seconds=matrix.timeout,
        diagnosis=f"the engine did not finish within {matrix.timeout:g} s (hang or deadlock); the run was stopped here",
        detail=f"Python stacks at the timeout:\n{stacks}",
    )


def run_matrix(matrix: Matrix, results: ResultsFile, out: TextIO | None = None,
               on_abort: Callable[[], None] = lambda: None) -> list[Verdict]:
    """Run every cell; on a hang, record it, call `on_abort` (write the report) and exit."""
    out = out or sys.stderr
    cells = list(matrix.cells())
    for index, (engine, family, scenario) in enumerate(cells, 1):
        print(f"[{index}/{len(cells)}] {engine.name} {family} {scenario.name} ...", end=" ", file=out, flush=True)
        save_dir = None if matrix.save_arms == "none" else arms_directory(results.directory, engine.name, family, scenario.name)

        def abort(stacks: str, engine=engine, family=family, scenario=scenario) -> None:
            verdict = hang_verdict(matrix, engine, family, scenario, stacks)
            print(f"HUNG after {matrix.timeout:g}s\n{verdict.message()}", file=out, flush=True)
            results.add(verdict)
            on_abort()

        options = RunOptions(timeout=matrix.timeout, on_hang=abort if matrix.timeout > 0 else None,
                             workdir=Path(results.directory) / "launches" / engine.name / family / scenario.name)
        verdict = run_scenario(engine, scenario, family, matrix.dtype, matrix.device, save_dir=save_dir,
                               attention=matrix.attention, save_passing=matrix.save_arms == "all", options=options)
        worst = verdict.worst
        margin = "" if worst is None else f" (max margin {worst.margin:.2g})"
        print(f"{verdict.status.upper()}{margin} {verdict.seconds:.2f}s{why_not_all(verdict)}", file=out, flush=True)
        if verdict.failed:
            print(verdict.message(), file=out, flush=True)
        matrix.verdicts.append(verdict)
        results.add(verdict)
    return matrix.verdicts


def why_not_all(verdict: Verdict) -> str:
    """What was not judged, on the progress line: the reason of an unsupported verdict, the skipped arms of another."""
    if verdict.status == UNSUPPORTED:
        return f": {unsupported_reason(verdict)}"
    skipped = len(verdict.skipped_arms)
    return f" ({skipped} optional arm{'s' * (skipped > 1)} skipped: see the report)" if skipped else ""


def unsupported_reason(verdict: Verdict) -> str:
    """The engine's reason without the arm's name, so the same reason reads the same across scenarios."""
    first = verdict.detail.strip().splitlines()[0] if verdict.detail.strip() else "no reason given"
    return re.sub(r"^arm '[^']*': ", "", first)


def exit_status(verdicts: Sequence[Verdict]) -> int:
    return 1 if any(v.failed for v in verdicts) else 0
