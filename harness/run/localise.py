"""Locate where the two arms of a failing comparison first part: rebuild the two arms from the scenario's plan, run
each again in its engine's processes with activation capture on (the worker's "capture" mode,
harness/engines/capture.py), and compare what they captured point by point (harness/compare/divergence.py).

Only a localisation pays for capture: ordinary runs never hook a module. The arms are rebuilt, not read back, so
localising needs neither saved arms nor the run's launches: `packcheck run --localise` calls `localise` right after
a failing verdict, `packcheck localise RUN_DIR/VERDICT` later from the run's files (harness/cli/localise_cmd.py).
Each arm runs under the run's per-arm timeout, so a localisation takes at most two arms' time (plus a start-up).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Mapping

from packcheck.harness.compare import ArmId, Comparison, Pass
from packcheck.harness.compare.divergence import Divergence, first_divergence, unavailable
from packcheck.harness.contract import Case
from packcheck.harness.contract.activations import Activations, CaptureRequest
from packcheck.harness.engines import EngineInfo
from packcheck.harness.engines.capture import active_recorder
from packcheck.harness.launch import OK, LaunchFailed, LaunchPool
from packcheck.harness.launch.layout import CaseDir
from packcheck.harness.run import placement
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import add_localisation
from packcheck.harness.scenarios import Scenario, Setting
from packcheck.harness.scenarios.base import Before

# the recorder as an adapter imports it, named from the function itself so the hint cannot drift from the code
RECORDER = f"{active_recorder.__module__}.{active_recorder.__name__}()"
WHY_NOT_CAPTURED = ("it does not capture activations: an engine opts in with Capabilities(activations=True) and, in its run, "
                    f"attaches its model to {RECORDER} (docs/report.md, \"Where it parts\")")


def target(comparisons: tuple[Comparison, ...]) -> Comparison | None:
    """The comparison a localisation re-runs: the worst failing one between two arms (not against the harness or a golden)."""
    between = [c for c in comparisons if not c.passed and c.arms.against_arm]
    return max(between, key=lambda c: c.margin, default=None)


def plan_arms(scenario: Scenario, setting: Setting, pass_: Pass) -> dict[ArmId, tuple[Case, str | None]]:
    """Every arm the plan builds from the setting alone, with its stage's runner (None: the engine under test). A stage
    built from earlier arms' results (an RL arm's old log-probs) cannot be rebuilt without running them: it is left out."""
    arms: dict[ArmId, tuple[Case, str | None]] = {}
    for stage in scenario.stages:
        before = Before(cases={arm.name: case for arm, (case, runner) in arms.items() if runner is None})
        try:
            built = stage.build(setting, before)
        except (KeyError, LookupError):
            break
        arms |= {ArmId(name, stage.role, pass_): (case, stage.runner) for name, case in built.items()}
    return arms


def localise_verdict(engine: EngineInfo, scenario: Scenario, setting: Setting, comparisons: tuple[Comparison, ...],
                     pool: LaunchPool, noise_floors: Mapping[str, Mapping[str, float]] | None = None) -> Divergence:
    """Where the arms of the verdict's worst failing arm-to-arm comparison first part (`packcheck run --localise`)."""
    compared = target(comparisons)
    if compared is None:
        return unavailable("", "", "no failing comparison is between two arms (the failures are against the harness's own "
                                   "definition or a golden): there is no second run to compare modules with")
    return localise(engine, scenario, setting, compared.arms.arm, compared.arms.against, pool, noise_floors)


def localise(engine: EngineInfo, scenario: Scenario, setting: Setting, arm: ArmId, against: ArmId, pool: LaunchPool,
             noise_floors: Mapping[str, Mapping[str, float]] | None = None, request: CaptureRequest = CaptureRequest()) -> Divergence:
    """Where `arm` first parts from `against`: both rebuilt from the plan on `setting` (the CPU float64 pass's setting
    for arms of that pass) and run again with capture on; compared on the samples the scenario keeps in every arm."""
    started = time.perf_counter()
    built_from = setting if arm.pass_ is Pass.MAIN else placement.logic_setting(setting)
    arms = plan_arms(scenario, built_from, arm.pass_)
    missing = [str(a) for a in (arm, against) if a not in arms]
    if missing:
        return unavailable(str(arm), str(against), f"arm {', '.join(missing)} is built from other arms' results and cannot be re-run alone")
    captured = []
    for which in (arm, against):
        case, runner = arms[which]
        got = _capture(engine if runner is None else runner, case, pool, request)
        if isinstance(got, str):
            return unavailable(str(arm), str(against), f"arm {which}: {got}")
        captured.append(got)
    # activations are judged as gradients are (relative L2), by the grad row of the table the arms' verdict was judged by;
    # no comparison of the verdict judged an activation, so there is no Comparison's bound to read
    bound = built_from.tolerance(noise_floors).by("grad")
    kept = None if scenario.kept_samples is None else scenario.kept_samples(built_from)
    found = first_divergence(str(arm), captured[0], str(against), captured[1], bound["threshold"], bound["bound"], kept)
    return replace(found, seconds=time.perf_counter() - started)


def localise_in_run(matrix, engine: EngineInfo, scenario: Scenario, verdict: Verdict, run_dir: RunDir, pool: LaunchPool) -> str:
    """`packcheck run --localise`: locate a failing verdict of the matrix, record it in the run's localisations, and
    say it in a line."""
    setting = matrix.inputs.setting(verdict.family, verdict.dtype, verdict.device, verdict.attention)
    divergence = localise_verdict(engine, scenario, setting, verdict.comparisons, pool, matrix.noise_floors)
    add_localisation(run_dir, verdict, divergence)
    return f"{divergence.sentence()} ({divergence.seconds:.1f} s)"


def _capture(runner: EngineInfo | str, case: Case, pool: LaunchPool, request: CaptureRequest) -> Activations | str:
    """The arm's activations, or why there are none."""
    try:
        info = runner if isinstance(runner, EngineInfo) else pool.engine_info(runner, "cpu")
    except LaunchFailed as failed:
        return f"its engine did not start: {failed.text.splitlines()[0] if failed.text else ''}"
    if not info.capabilities.activations:
        return f"engine {info.name!r} cannot say where its arms part: {WHY_NOT_CAPTURED}"
    try:
        outcome = pool.run(info.spec, case, mode="capture", capture=request.to_json())
        if outcome.status != OK or outcome.directory is None:
            return f"the capture run did not succeed ({outcome.status}): {outcome.describe().splitlines()[0]}"
        directory = CaseDir(outcome.directory)
        ranks = [directory.activations(r) for r in range(case.parallel.world_size)]
        if not all(path.exists() for path in ranks):
            return (f"engine {info.name!r} declares Capabilities(activations=True) but attached no model to the recorder "
                    f"({RECORDER}.attach(model) in its run)")
        return Activations.combine([Activations.load(path) for path in ranks])
    finally:
        pool.discard_cases()
