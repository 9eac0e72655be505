"""Run one scenario against one engine: execute its plan's stages in the engine's own processes, judge the arms,
and conclude the verdict from what happened.

Every arm runs in a launch of the engine (harness/launch: world 1 and dp x cp meshes alike), kept
warm in a LaunchPool across the arms, scenarios and families of a run; the harness's process runs
no engine code and sees only the files the engine's processes write. Everything an engine does
wrong becomes a verdict, never an exception out of here: an arm outside its declaration ->
unsupported (optional arms: skipped, and named); UnsupportedCase for a case it declared
supported, a crash, an exit or a signal on any rank -> error with what happened; a hang -> hang
with every rank's state; an invalid StepResult -> fail naming every broken field.

The steps, each its own module: execution.py runs a pass of the plan into typed arm outcomes;
judge.py judges them; conclusion.py concludes the pass from that data; placement.py combines the
run's own pass with the CPU float64 pass (arms with more ranks than the machine has GPUs). Here:
which passes run, the files a verdict writes (saved arms, a failing golden's obtained result), and
the known findings. Nothing of an arm outlives its verdict but what `save_dir` (or the run directory's cases/,
harness/run_dir) keeps: once the verdict is decided, the pool discards the folders of the cases it ran
(harness/launch/tidy.py).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from packcheck.harness.compare import ArmId, Pass
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Engine, EngineInfo, finding_for
from packcheck.harness.golden import obtained_beside_golden, write_obtained
from packcheck.harness.judging.status import Status
from packcheck.harness.launch import LaunchFailed, LaunchPool, engine_spec
from packcheck.harness.provenance import provenance
from packcheck.harness.run import placement
from packcheck.harness.run.conclusion import Note, PassVerdict, conclude_pass, first_error_line, judgeable, reason
from packcheck.harness.run.execution import Execution, execute
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.invalid_arms import save_invalid_arms
from packcheck.harness.run.judge import Judged, judge, judgement
from packcheck.harness.run.null_arms import bases_to_measure, measure_nulls
from packcheck.harness.run.outcomes import Kind
from packcheck.harness.run.spot_checks import SpotChecks, failed_by_drawn
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.saved_arms import save_arm
from packcheck.harness.scenarios import Scenario, Setting

DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    timeout: float = DEFAULT_TIMEOUT  # seconds per arm (per case on every rank)
    pool: LaunchPool | None = None  # the run's warm launches; None: a pool of this verdict's own, closed after it
    inputs: Inputs = Inputs()  # the model, seed and data scale every arm is built from
    # arms with more ranks than the machine has GPUs run on the CPU in float64 (False: skipped and named; for
    # `packcheck calibrate`, which measures the asked dtype's noise, not the logic the CPU pass checks)
    logic_pass: bool = True
    noise_floors: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # dtype -> field -> floor (--noise-floors)
    # the run's directory (None: none): a failing golden's obtained result goes there, and, where no `save_dir` is given
    # and `save_arms` (False: --save-arms none), the verdict's arms, to its cases/
    run_dir: RunDir | None = None
    save_arms: bool = True
    # the run's draw of arms for the absolute check to judge again (harness/run/spot_checks.py); None: no draw
    spot: SpotChecks | None = None


def setting_for(family: str, dtype: str, device: str, attention: str = "auto", inputs: Inputs = Inputs()) -> Setting:
    return inputs.setting(family, dtype, device, attention)


def run_scenario(engine: EngineInfo | str | Engine | type[Engine], scenario: Scenario, family: str, dtype: str = "float64", device: str = "cpu",
                 save_dir: Path | None = None, attention: str = "auto", save_passing: bool = True,
                 options: RunOptions = RunOptions()) -> Verdict:
    """Judge `engine` (its description, the spec to build it from, or its class) on `scenario`; with
    `save_dir`, keep each arm's case and result there (only for failing verdicts unless `save_passing`).
    The engine runs in processes of its own, built from its spec: an instance's class must be importable."""
    if not isinstance(engine, (EngineInfo, str)):
        engine = engine_spec(engine)
    if options.pool is not None:
        return _run_scenario(engine, scenario, family, dtype, device, save_dir, attention, save_passing, options.pool, options)
    with LaunchPool(Path(tempfile.mkdtemp(prefix="packcheck-launches-")), options.timeout) as pool:
        return _run_scenario(engine, scenario, family, dtype, device, save_dir, attention, save_passing, pool, options)


@dataclass(frozen=True, kw_only=True, slots=True)
class Saving:
    """Where a verdict's arms go: `directory` (None: nowhere), for every verdict or (not `passing`) failing ones only; and
    a failing golden arm's result, for a diff with its golden (`obtained`; None: nowhere)."""

    directory: Path | None
    passing: bool
    obtained: Path | None = None


def _run_scenario(engine: EngineInfo | str, scenario: Scenario, family: str, dtype: str, device: str, save_dir: Path | None,
                  attention: str, save_passing: bool, pool: LaunchPool, options: RunOptions) -> Verdict:
    started, inputs = time.perf_counter(), options.inputs
    spec = engine if isinstance(engine, str) else engine.spec
    cell = Verdict(engine=spec if isinstance(engine, str) else engine.name, engine_spec=spec, family=family, scenario=scenario.name,
                   dtype=dtype, device=device, status=Status.PASS, attention=attention, inputs=inputs.flags())
    try:
        info = pool.engine_info(spec, device) if isinstance(engine, str) else engine
    except LaunchFailed as failed:
        return dataclasses.replace(did_not_start(cell, failed), seconds=time.perf_counter() - started)
    cell = dataclasses.replace(cell, engine=info.name)
    if save_dir is None and options.run_dir is not None and options.save_arms:
        save_dir = options.run_dir.arms(info.name, family, scenario.name)
    obtained = options.run_dir.obtained(info.name, family) if options.run_dir is not None else obtained_beside_golden(family)
    saving = Saving(directory=save_dir, passing=save_passing, obtained=obtained)
    setting = setting_for(family, dtype, device, attention, inputs)
    why = scenario.applies(setting, info.capabilities)
    try:
        verdict = unsupported(cell, why) if why is not None else judge_placed(info, scenario, setting, cell, pool, saving, options)
    finally:
        pool.discard_cases()  # the verdict is decided and its arms saved where asked: its case folders go
    finding = finding_for(info.known_findings, scenario.name, family)
    if finding is not None and numeric_failure(verdict) and verdict.worst.margin >= finding.min_margin:
        verdict = dataclasses.replace(verdict, known_finding=finding.headline())
    return dataclasses.replace(verdict, seconds=time.perf_counter() - started)


def judge_placed(info: EngineInfo, scenario: Scenario, setting: Setting, cell: Verdict, pool: LaunchPool, saving: Saving,
                 options: RunOptions) -> Verdict:
    """Judge the arms this machine hosts on the asked device; those with more ranks than it has GPUs run on the CPU
    in float64 with the scenario's single-process and required arms (its baselines), judged apart (harness/run/placement.py)."""
    here = setting.device != "cuda" or not placement.required_arm_moves(scenario, scenario.build(setting))
    if not here and not options.logic_pass:
        return unsupported(cell, "a required arm has more ranks than this machine has GPUs, and the CPU pass is off")
    main, moved, given = None, (), {}
    if here:
        given = options.spot.take(info, setting) if options.spot is not None and scenario.takes_spot_arms else {}
        run = execute(info, scenario, setting, Pass.MAIN, pool, host=True, given=given)
        main, moved = judge_pass(scenario, run, options, saving, Nulls(info, pool)), run.moved
        if not (main.judged and moved and options.logic_pass):
            return failed_by_drawn(placement.placed(cell, main, None, moved, ()), given)
    cpu = placement.logic_setting(setting)
    keep = None if not here else (lambda arm, case: case.parallel.world_size == 1 or not scenario.optional(arm)
                                  or arm.in_pass(Pass.MAIN) in moved)
    run = execute(info, scenario, cpu, Pass.CPU_LOGIC, pool, keep=keep)
    logic = judge_pass(scenario, run, options, saving, Nulls(info, pool), opening=(Note(placement.logic_note(setting, cpu)),))
    relocated = [str(arm) for arm in moved] if here else [arm.local for arm in run.cases]
    return failed_by_drawn(placement.placed(cell, main, logic, moved, relocated), given)


@dataclass(frozen=True, slots=True)
class Nulls:
    """Who measures a pass's gradient nulls where it needs them (harness/run/null_arms.py): the engine, in the run's launches."""

    engine: EngineInfo
    pool: LaunchPool


def judge_pass(scenario: Scenario, run: Execution, options: RunOptions, saving: Saving, nulls: Nulls,
               opening: tuple[Note, ...] = ()) -> PassVerdict:
    """Judge a pass's arms where they can be judged (again with the nulls of the arms its failing gradient rows were
    compared against, where those could lift them), conclude the pass, and save its arms."""
    judged = None
    if judgeable(scenario, run):
        tolerance = run.setting.tolerance(options.noise_floors)
        judged = judge(scenario, judgement(scenario, run.setting, run.cases, run.results, tolerance))
        if bases := bases_to_measure([] if judged.crashed else judged.failed, run.setting.dtype):
            measured, said = measure_nulls(nulls.engine, run, bases, nulls.pool, tolerance)
            if measured:
                tolerance = dataclasses.replace(tolerance, nulls=measured)
                judged = judge(scenario, judgement(scenario, run.setting, run.cases, run.results, tolerance))
            judged = dataclasses.replace(judged, notes=judged.notes + tuple(said))
        if judged.failed and not judged.crashed:
            judged = keep_obtained(scenario, run, judged, saving.obtained)
    verdict = conclude_pass(scenario, run, judged, opening)
    if options.spot is not None and run.pass_ is Pass.MAIN and not scenario.takes_spot_arms:
        options.spot.offer(nulls.engine, run.setting, scenario.name, run.cases, run.results)
    if saving.directory is not None and (saving.passing or verdict.failed) and not run.ended:
        save_arms(saving.directory, run.cases, run.results)
        save_invalid_arms(saving.directory, run.set_aside)
        nulls.pool.saved(saving.directory)  # held as saved: a later change names the engines alive since
    return verdict


def keep_obtained(scenario: Scenario, run: Execution, judged: Judged, path: Path | None) -> Judged:
    """A failing golden stage's result, written to `path` for a diff with its golden (pytest-regressions' `.obtained`),
    and the diagnosis says where; or why it was not written (nowhere to put it, or not writable there)."""
    for outcome in run.outcomes:
        if outcome.kind is Kind.RAN and scenario.stages[outcome.stage].golden:
            if path is None:
                said = "; the obtained result is kept only in a run directory (give --out DIR) or beside your own goldens"
            else:
                try:
                    write_obtained(run.setting.family, outcome.case, outcome.result, provenance(outcome.case.device), path)
                    said = f"; the obtained result is written to {path} for a diff with the golden"
                except OSError as err:
                    said = f"; the obtained result could not be written to {path} ({err.strerror or err})"
            return dataclasses.replace(judged, diagnosis=judged.diagnosis + said)
    return judged


CONTRACT_QUANTITIES = ("result", "mesh")  # failures of the contract, not of the numbers: no finding excuses them


def numeric_failure(verdict: Verdict) -> bool:
    """A failing verdict whose failures are all numeric: only such a failure can be a pinned known
    finding (an invalid result or an unused mesh has margin inf, and would match any finding)."""
    failed = [c for c in verdict.comparisons if not c.passed]
    return verdict.status is Status.FAIL and bool(failed) and not any(c.quantity in CONTRACT_QUANTITIES for c in failed)


def unsupported(cell: Verdict, why: str) -> Verdict:
    return dataclasses.replace(cell, status=Status.UNSUPPORTED, detail=why, reason=reason((Note(why),)))


def did_not_start(cell: Verdict, failed: LaunchFailed) -> Verdict:
    """The verdict of a cell whose engine never got to its first case: hung while building, or failed."""
    return dataclasses.replace(cell, status=Status.HANG if failed.hung else Status.ERROR, detail=failed.text,
                               diagnosis=("importing or constructing the engine hung: see the stacks" if failed.hung
                                          else "the engine did not start: " + first_error_line(failed.text)))


def save_arms(directory: Path, cases: Mapping[ArmId, Case], results: Mapping[ArmId, StepResult]) -> None:
    """Each arm's Case (JSON) and StepResult (safetensors + JSON), for reports and re-judging."""
    for arm, result in results.items():
        save_arm(directory, str(arm), cases[arm], result)
