"""Run the matrix engines x families x scenarios for one dtype and device, with progress and an
ETA (harness/run/progress.py), into a results table; the exit status follows the CLI contract (0 all
supported pass, 1 a failure).

Every arm runs in the engine's own processes (a LaunchPool the caller owns), so a hang, a crash or
an exit is one engine's verdict and the run goes on. An engine that does not even start gets an
error verdict in every cell it was asked for; the other engines still run.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence, TextIO

from packcheck.harness.compare.bound import Source
from packcheck.harness.engines import EngineInfo
from packcheck.harness.judging.status import Status
from packcheck.harness.launch import LaunchFailed, LaunchPool
from packcheck.harness.models import FAMILIES
from packcheck.harness.run.conclusion import first_error_line
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.progress import Progress
from packcheck.harness.run.scenario_runner import RunOptions, did_not_start, run_scenario
from packcheck.harness.run.localise import localise_in_run
from packcheck.harness.run.options import SPOT_ARMS
from packcheck.harness.run.spot_checks import SpotChecks
from packcheck.harness.run.untested import NOTHING_JUDGED, no_family
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.run_dir.results import ResultsFile
from packcheck.harness.scenarios import Scenario
from packcheck.harness.text import safe_line, safe_text


@dataclass(kw_only=True)
class Matrix:
    engines: Sequence[str]  # specs: registered names or package.module:Class
    families: Sequence[str] | None  # None: every family each engine declares
    scenarios: Sequence[Scenario]
    dtype: str = "float64"
    device: str = "cpu"
    attention: str = "auto"
    save_arms: str = "failing"  # all | failing | none
    dtype_for: dict[str, str] = field(default_factory=dict)  # engine spec -> its dtype where it is not `dtype` (--dtype auto)
    inputs: Inputs = field(default_factory=Inputs)  # --model, --seed, --data-scale
    logic_pass: bool = True  # arms with more ranks than GPUs run on the CPU in float64 (False: skipped; calibration)
    noise_floors: dict[str, dict[str, float]] = field(default_factory=dict)  # dtype -> field -> floor (--noise-floors)
    spot_arms: int = SPOT_ARMS  # --spot-arms: arms of each engine and setting the absolute check judges too (spot_checks.py)
    localise: bool = False  # --localise: after each failing verdict, where its arms first part (harness/run/localise.py)
    verdicts: list[Verdict] = field(default_factory=list)
    not_started: dict[str, LaunchFailed] = field(default_factory=dict)  # engine spec -> why its processes never came up
    untested: dict[str, str] = field(default_factory=dict)  # engine spec -> why it had no cell (harness/run/untested.py)

    def families_of(self, engine: EngineInfo | None) -> list[str]:
        if self.families:
            return list(self.families)
        return sorted(set(FAMILIES) & engine.capabilities.families) if engine is not None else sorted(FAMILIES)


def run_matrix(matrix: Matrix, results: ResultsFile, pool: LaunchPool, out: TextIO | None = None) -> list[Verdict]:
    """Run every cell, engine by engine (each engine's launches stay warm across its cells), with progress and an ETA."""
    expected = len(matrix.families_of(None)) * len(matrix.scenarios)  # an engine's cells until it starts and declares its families
    per_family = sum(work_of(scenario) for scenario in matrix.scenarios)
    expected_work = len(matrix.families_of(None)) * per_family
    progress = Progress(out or sys.stderr, expected * len(matrix.engines), work=expected_work * len(matrix.engines))
    scenarios = sorted(matrix.scenarios, key=lambda scenario: scenario.takes_spot_arms)  # after the arms they draw from
    spot = SpotChecks(pool, size=matrix.spot_arms, noise_floors=matrix.noise_floors) if any(scenario.takes_spot_arms for scenario in scenarios) else None
    try:
        for spec in matrix.engines:
            try:
                engine: EngineInfo | None = pool.engine_info(spec, matrix.device)
            except LaunchFailed as failed:
                progress.note(safe_text(f"engine {spec}: did not start: {first_error_line(failed.text)}"))
                engine, failure = None, failed
                matrix.not_started[spec] = failed
            cells = [(family, scenario) for family in matrix.families_of(engine) for scenario in scenarios]
            if engine is not None and (why := untested(matrix, engine)) is not None:
                matrix.untested[spec] = why
            progress.recount(expected, len(cells), expected_work, len(matrix.families_of(engine)) * per_family)
            for n, (family, scenario) in enumerate(cells):
                progress.start(safe_line(spec if engine is None else engine.name, 200), family, scenario.name, work_of(scenario))
                if engine is None:
                    verdict = not_started(matrix, spec, family, scenario, failure)
                else:
                    verdict = run_scenario(engine, scenario, family, matrix.dtype_for.get(spec, matrix.dtype), matrix.device,
                                           attention=matrix.attention, save_passing=matrix.save_arms == "all",
                                           options=RunOptions(timeout=pool.timeout, pool=pool, inputs=matrix.inputs,
                                                             logic_pass=matrix.logic_pass, noise_floors=matrix.noise_floors,
                                                             run_dir=results.run_dir, save_arms=matrix.save_arms != "none",
                                                             spot=spot))
                said = verdict.failed and (engine is not None or n == 0)  # why an engine did not start: once, not in every cell
                progress.finish(verdict_line(verdict), safe_text(verdict.message()) if said else "")
                matrix.verdicts.append(verdict)
                results.add(verdict)
                if matrix.localise and engine is not None and verdict.status is Status.FAIL:
                    progress.note("  where it parts: " + safe_text(localise_in_run(matrix, engine, scenario, verdict, results.run_dir, pool)))
    finally:
        progress.close()
    return matrix.verdicts


def work_of(scenario: Scenario) -> float:
    """A cell's share of the matrix's work for the ETA: its scenario's arms (harness/run/progress.py)."""
    return float(scenario.disk_arms or 1)


def not_started(matrix: Matrix, spec: str, family: str, scenario: Scenario, failure: LaunchFailed) -> Verdict:
    return did_not_start(Verdict(engine=spec, engine_spec=spec, family=family, scenario=scenario.name, dtype=matrix.dtype,
                                 device=matrix.device, attention=matrix.attention, status=Status.ERROR), failure)


def verdict_line(verdict: Verdict) -> str:
    worst = verdict.worst
    ratio = None if worst is None else worst.floor_ratio
    floor = "" if ratio is None else f", {ratio:.2g}x the reference's noise floor"
    margin = "" if worst is None else f" (worst error/tolerance {worst.margin:.2g}{floor})"
    return f"{verdict.status.upper()}{margin} {verdict.seconds:.2f}s{lifted_by_nulls(verdict)}{why_not_all(verdict)}"


def lifted_by_nulls(verdict: Verdict) -> str:
    """The gradient rows over the table alone that a null measured in the run judged (harness/run/null_arms.py): on the
    progress line, so that a pass the table alone would have failed never reads as a plain pass."""
    lifted = [c for c in verdict.comparisons if c.bound.source is Source.NULL and c.observed > c.bound.table]
    if not lifted:
        return ""
    bases = ", ".join(sorted({c.arms.against.local for c in lifted}))
    return (f" ({len(lifted)} gradient row{'s' * (len(lifted) > 1)} over the table alone, judged by the engine's own rounding "
            f"of {bases}, measured in the run)")


def why_not_all(verdict: Verdict) -> str:
    """What was not judged, on the progress line: the reason of an unsupported verdict, the skipped arms of another."""
    if verdict.status is Status.UNSUPPORTED:
        return f": {verdict.reason}"
    skipped, moved = len(verdict.skipped_arms), len(verdict.relocated_arms)
    named = ", ".join(verdict.skipped_arms)
    return ((f" (optional arm{'s' * (skipped > 1)} {named} skipped: why is in the report)" if skipped else "")
            + (f" ({moved} arm{'s' * (moved > 1)} on the CPU in float64: more ranks than GPUs)" if moved else ""))


def where_arms_ran(verdicts: Sequence[Verdict]) -> str:
    """The run's arms by device and dtype, and how many ran on the CPU for want of GPUs ("" when none moved)."""
    totals = Counter()
    for verdict in verdicts:
        totals.update(verdict.arms_run)
    moved = sum(len(v.relocated_arms) for v in verdicts)
    if not moved:
        return ""
    places = ", ".join(f"{n} on {place}" for place, n in sorted(totals.items()))
    return (f"arms: {places}; {moved} arm(s) with more ranks than this machine has GPUs ran on the CPU in float64 (gloo), "
            "judged against CPU float64 baselines")


def untested(matrix: Matrix, engine: EngineInfo) -> str | None:
    """Why the run has no cell for `engine` (it declares no family the run offers), or None."""
    return None if matrix.families_of(engine) else no_family(engine.capabilities.families, sorted(FAMILIES))


def nothing_judged(matrix: Matrix) -> list[str]:
    """The error lines of a run that judged nothing of some engine (exit 2): each such engine and why, or, where no
    engine explains an empty run, that it has no verdicts at all."""
    lines = [f"--engine {spec} {why}" for spec, why in matrix.untested.items()]
    return lines or ([] if matrix.verdicts else [NOTHING_JUDGED])


def exit_status(verdicts: Sequence[Verdict]) -> int:
    return 1 if any(v.failed for v in verdicts) else 0
