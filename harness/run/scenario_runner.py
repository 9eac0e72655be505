"""Run one scenario against one engine: build the arms, run them in the engine's own processes,
validate, judge, diagnose.

Every arm runs in a launch of the engine (harness/launch: world 1 and dp x cp meshes alike), kept
warm in a LaunchPool across the arms, scenarios and families of a run; the harness's process runs
no engine code and sees only the files the engine's processes write. Everything an engine does
wrong becomes a verdict, never an exception out of here: an arm outside its declaration ->
unsupported (optional arms: skipped, and named); UnsupportedCase for a case it declared
supported, a crash, an exit or a signal on any rank -> error with what happened; a hang -> hang
with every rank's state; an invalid StepResult -> fail naming every broken field.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from packcheck.harness.collectives import unused_mesh
from packcheck.harness.compare import HARNESS, ArmId, Arms, Comparison, Pass, Role, tolerance_for
from packcheck.harness.compare.tolerances import noise_floors
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Engine, EngineInfo, InvalidResult, finding_for, validate_result
from packcheck.harness.golden import write_obtained
from packcheck.harness.launch import ERROR as LAUNCH_ERROR
from packcheck.harness.launch import HANG as LAUNCH_HANG
from packcheck.harness.launch import INVALID as LAUNCH_INVALID
from packcheck.harness.launch import UNSUPPORTED as LAUNCH_UNSUPPORTED
from packcheck.harness.launch import CaseOutcome, LaunchFailed, LaunchPool, engine_spec
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.provenance import provenance
from packcheck.harness.run import placement
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.invalid_arms import InvalidArm, InvalidArms, conclude, save_invalid_arms, summarise
from packcheck.harness.run.verdict import ERROR, FAIL, HANG, PASS, UNSUPPORTED, Verdict
from packcheck.harness.scenarios import Judgement, Scenario, Setting
from packcheck.harness.scenarios.base import Before, Stage

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


def setting_for(family: str, dtype: str, device: str, attention: str = "auto", inputs: Inputs = Inputs()) -> Setting:
    return inputs.setting(family, dtype, device, attention)


class ArmProblem(Exception):
    """An arm ended the verdict: `status` and `detail` say how (`problems`: an invalid result's, field by field)."""

    def __init__(self, status: str, detail: str, comparison: Comparison | None = None, problems: list[str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.comparison, self.problems = status, detail, comparison, problems


def invalid(name: ArmId, problems: list[str]) -> ArmProblem:
    comparison = Comparison(arms=Arms(name, HARNESS), quantity="result", item="", metric="invalid",
                            observed=float(len(problems)), threshold=0.0, where=problems[0])
    lines = "\n  - ".join(problems)
    return ArmProblem(FAIL, f"arm {str(name)!r}: the engine returned an invalid StepResult:\n  - {lines}", comparison, problems)


def accept(engine: EngineInfo, name: ArmId, case: Case, outcome: CaseOutcome) -> StepResult | None:
    """The arm's result, validated again here; None when the engine itself declined the case."""
    if outcome.status == LAUNCH_UNSUPPORTED:
        return None
    if outcome.status == LAUNCH_INVALID:
        raise invalid(name, outcome.invalid)
    if outcome.status == LAUNCH_HANG:
        raise ArmProblem(HANG, f"arm {str(name)!r} ({case.describe()}):\n{outcome.hang.describe()}")
    if outcome.status == LAUNCH_ERROR and (outcome.error_type or "").endswith(".UnsupportedCase"):
        raise ArmProblem(ERROR, f"arm {str(name)!r}: the engine raised UnsupportedCase for a case its capabilities declare supported: "
                                f"fix the declaration or the engine.\n{outcome.error}")
    if outcome.status == LAUNCH_ERROR:
        raise ArmProblem(ERROR, f"arm {str(name)!r} ({case.describe()}) failed:\n{outcome.error}")
    try:
        result = validate_result(engine.name, case, outcome.result)
    except InvalidResult as err:
        raise invalid(name, err.problems) from None
    if case.parallel.world_size > 1:
        problems = unused_mesh(case.parallel, int(case.model.config["num_hidden_layers"]), result.collectives or [])
        if problems:
            raise ArmProblem(FAIL, f"arm {str(name)!r} ({case.describe()}) did not run on its mesh:\n  - " + "\n  - ".join(problems),
                             Comparison(arms=Arms(name, HARNESS), quantity="mesh", item=case.parallel.describe(), metric="unused",
                                        observed=float(len(problems)), threshold=0.0, where=problems[0]))
    return result


DIAGNOSES = {
    FAIL: lambda problem: (f"the engine did not run the arm on its mesh: {problem.comparison.where}" if problem.comparison.quantity == "mesh"
                           else f"the engine broke the result contract: {problem.comparison.where}"),
    ERROR: lambda problem: "the engine crashed: " + first_error_line(problem.detail),
    HANG: lambda problem: "a collective never completed on some rank (deadlock): see the per-rank states and stacks",
}


def run_arms(engine: EngineInfo, scenario: Scenario, cases: dict[ArmId, Case], verdict: Verdict,
             pool: LaunchPool, invalid: InvalidArms | None = None) -> dict[ArmId, StepResult] | None:
    """Run every arm the engine supports; on a problem fill `verdict` in and return None. With `invalid`, an
    arm whose result breaks the contract goes there instead and the other arms still run."""
    runnable = {}
    for name, case in cases.items():
        reason = engine.unsupported_reason(case) or cannot_host(case)
        if reason is None:
            runnable[name] = case
        elif not skip(verdict, scenario, name, reason):
            return None
    results: dict[ArmId, StepResult] = {}
    try:
        for name, case in sorted(runnable.items(), key=lambda item: item[1].parallel.world_size):  # fewer launch switches
            outcome = pool.run(engine.spec, case)
            try:
                result = accept(engine, name, case, outcome)
            except ArmProblem as problem:
                if invalid is None or problem.problems is None:
                    raise
                detail = f"arm {str(name)!r}: the engine returned an invalid StepResult:\n  - " + "\n  - ".join(summarise(problem.problems))
                invalid.arms[name] = InvalidArm(problems=problem.problems, comparison=problem.comparison, detail=detail,
                                                result=outcome.invalid_result if outcome.result is None else outcome.result)
                continue
            if result is None and not skip(verdict, scenario, name, f"the engine declines it: {outcome.unsupported}"):
                return None
            if result is not None:
                results[name] = result
    except ArmProblem as problem:
        verdict.status, verdict.detail = problem.status, verdict.detail + problem.detail
        verdict.diagnosis = DIAGNOSES[problem.status](problem)
        if problem.comparison is not None:
            verdict.comparisons.append(problem.comparison)
        return None
    return {name: results[name] for name in cases if name in results}


def run_oracle_arms(runner: str, scenario: Scenario, cases: dict[ArmId, Case], verdict: Verdict,
                    pool: LaunchPool) -> dict[ArmId, StepResult] | None:
    """An oracle stage's arms on its engine `runner`; a failure there is packcheck's, and says so."""
    try:
        oracle = pool.engine_info(runner, "cpu")
    except LaunchFailed as failed:
        verdict.status, verdict.detail = ERROR, verdict.detail + failed.text
        verdict.diagnosis = f"the oracle engine {runner!r} did not start: a packcheck problem, not the engine's"
        return None
    oracle_results = run_arms(oracle, scenario, cases, verdict, pool)
    if oracle_results is None:
        verdict.diagnosis = (f"the oracle engine {runner!r} failed on its arm (a packcheck problem, not the engine's): "
                             f"{verdict.diagnosis}")
        return None
    return oracle_results


def skip(verdict: Verdict, scenario: Scenario, name: ArmId, reason: str) -> bool:
    """Skip an optional arm (named in the verdict) and go on; a required one makes the verdict unsupported."""
    if scenario.optional(name):
        verdict.detail += f"arm {str(name)!r} skipped: {reason}\n"
        verdict.skipped_arms.append(str(name))
        return True
    verdict.status, verdict.detail = UNSUPPORTED, f"arm {str(name)!r}: {reason}"
    return False


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


def _run_scenario(engine: EngineInfo | str, scenario: Scenario, family: str, dtype: str, device: str, save_dir: Path | None,
                  attention: str, save_passing: bool, pool: LaunchPool, options: RunOptions) -> Verdict:
    started, inputs = time.perf_counter(), options.inputs
    spec = engine if isinstance(engine, str) else engine.spec
    verdict = Verdict(engine=spec if isinstance(engine, str) else engine.name, engine_spec=spec, family=family, scenario=scenario.name,
                      dtype=dtype, device=device, status=PASS, attention=attention, inputs=inputs.flags(),
                      noise_floors=noise_floors(dtype) | dict(options.noise_floors.get(dtype, {})))
    try:
        info = pool.engine_info(spec, device) if isinstance(engine, str) else engine
    except LaunchFailed as failed:
        did_not_start(verdict, failed)
        verdict.seconds = time.perf_counter() - started
        return verdict
    verdict.engine = info.name
    setting = setting_for(family, dtype, device, attention, inputs)
    why = scenario.applies(setting, info.capabilities)
    if why is not None:
        verdict.status, verdict.detail = UNSUPPORTED, why
    else:
        judge_placed(info, scenario, setting, verdict, pool, save_dir, save_passing, options.logic_pass)
    finding = finding_for(info.known_findings, scenario.name, family)
    if finding is not None and numeric_failure(verdict) and verdict.worst.margin >= finding.min_margin:
        verdict.known_finding = finding.headline()
    verdict.seconds = time.perf_counter() - started
    return verdict


def judge_placed(info: EngineInfo, scenario: Scenario, setting: Setting, verdict: Verdict, pool: LaunchPool, save_dir: Path | None,
                 save_passing: bool, logic_pass: bool = True) -> None:
    """Judge the arms this machine hosts on the asked device; those with more ranks than it has GPUs run on the CPU
    in float64 with the scenario's single-process and required arms (its baselines), judged apart (harness/run/placement.py)."""
    moved: list[ArmId] = []
    here = setting.device != "cuda" or not placement.required_arm_moves(scenario, scenario.build(setting))
    if not here and not logic_pass:
        verdict.status, verdict.detail = UNSUPPORTED, "a required arm has more ranks than this machine has GPUs, and the CPU pass is off"
        return
    if here:
        invalid = InvalidArms()
        cases, results = build_and_run(info, scenario, setting, verdict, pool, moved, invalid=invalid)
        verdict.arms_run = dict(placement.arms_run(cases, results))
        judge_and_save(verdict, scenario, setting, cases, results, invalid, save_dir, save_passing)
        if results is None and moved:
            verdict.detail += f"arms {', '.join(map(str, moved))} (more ranks than this machine has GPUs) were not run on the CPU: the verdict ended first\n"
        if results is not None and moved and not logic_pass:
            verdict.skipped_arms += map(str, moved)
            verdict.detail += f"arms {', '.join(map(str, moved))} (more ranks than this machine has GPUs) were skipped: the CPU pass is off\n"
        if results is None or not moved or not logic_pass:
            return
    logic = Verdict(engine=verdict.engine, engine_spec=verdict.engine_spec, family=verdict.family, scenario=scenario.name,
                    dtype=placement.LOGIC_DTYPE, device=placement.LOGIC_DEVICE, status=PASS, attention=verdict.attention)
    cpu = placement.logic_setting(setting)
    logic.detail += placement.logic_note(setting, cpu)
    keep = None if not here else (lambda name, case: case.parallel.world_size == 1 or not scenario.optional(name) or name in moved)
    invalid = InvalidArms()
    cases, results = build_and_run(info, scenario, cpu, logic, pool, keep=keep, invalid=invalid)
    judge_and_save(logic, scenario, cpu, cases, results, invalid, save_dir, save_passing, pass_=Pass.CPU_LOGIC)
    placement.merge(verdict, logic, moved if here else list(cases), here)
    verdict.arms_run = dict(Counter(verdict.arms_run) + placement.arms_run(cases, results))


def build_and_run(info: EngineInfo, scenario: Scenario, setting: Setting, verdict: Verdict, pool: LaunchPool,
                  moved: list[ArmId] | None = None, keep=None, invalid: InvalidArms | None = None) -> tuple[dict[ArmId, Case], dict[ArmId, StepResult] | None]:
    """The scenario's stages, run in order; an arm the machine cannot host goes to `moved` instead (where `moved` is
    given), and only arms `keep` accepts are built (every arm without it). With `invalid`, an arm of the first stage
    whose result breaks the contract is set aside there and the rest still run (and are judged where they can be)."""
    def hosted(stage: Stage, arms: dict[str, Case]) -> dict[ArmId, Case]:
        arms = {ArmId(name, stage.role): case for name, case in arms.items()}
        arms = {name: case for name, case in arms.items() if keep is None or keep(name, case)}
        if moved is None:
            return arms
        moved.extend(name for name, case in arms.items() if placement.needs_more_gpus(case))
        return {name: case for name, case in arms.items() if name not in moved}

    cases: dict[ArmId, Case] = {}
    results: dict[ArmId, StepResult] = {}
    for index, stage in enumerate(scenario.stages):
        before = Before(cases={arm.name: case for arm, case in cases.items() if arm.role is Role.ENGINE},
                        results={arm.name: result for arm, result in results.items() if arm.role is Role.ENGINE})
        built = hosted(stage, stage.build(setting, before))
        cases |= built
        ran = (run_arms(info, scenario, built, verdict, pool, invalid if index == 0 else None) if stage.runner is None
               else run_oracle_arms(stage.runner, scenario, built, verdict, pool))
        if ran is None:
            return cases, None
        results |= ran
        if index == 0 and invalid:
            invalid.valid, invalid.blocked = results, invalid.blocks_judging(scenario, results)
            if invalid.blocked is not None:
                return cases, None
    return cases, results


def judge_and_save(verdict: Verdict, scenario: Scenario, setting: Setting, cases: dict[ArmId, Case], results: dict[ArmId, StepResult] | None,
                   invalid: InvalidArms, save_dir: Path | None, save_passing: bool, pass_: Pass = Pass.MAIN) -> None:
    """Judge the arms that ran into `verdict`, fold the invalid ones in (a NaN does not hide the rest: they fail it,
    the valid arms are still judged) and save every arm, named in its pass `pass_`."""
    if results is not None:
        tolerance = tolerance_for(setting.dtype, verdict.noise_floors)
        judge(verdict, scenario, judgement(setting, cases, results, tolerance))
    if invalid and invalid.valid is not None:
        conclude(verdict, invalid, cases, invalid.blocked)
        results = results if results is not None else invalid.valid
    elif invalid:  # a later arm ended the verdict (a crash, a hang): the invalid arms before it are evidence all the same
        verdict.comparisons += [arm.comparison for arm in invalid.arms.values()]
        verdict.detail = "".join(arm.detail + "\n" for arm in invalid.arms.values()) + verdict.detail
    if save_dir is None or not (save_passing or verdict.failed) or results is None:
        return
    named = {str(arm.in_pass(pass_)): case for arm, case in cases.items()}
    save_arms(save_dir, named, {str(arm.in_pass(pass_)): result for arm, result in results.items()})
    save_invalid_arms(save_dir, {str(arm.in_pass(pass_)): invalid_arm for arm, invalid_arm in invalid.arms.items()}, named)


def judgement(setting: Setting, cases: Mapping[ArmId, Case], results: Mapping[ArmId, StepResult], tolerance) -> Judgement:
    """What the judge sees of the arms that ran: the engine's by name, the oracle's by the engine arm each checks."""
    def named(arms: Mapping[ArmId, object], role: Role) -> dict:
        return {arm.name: value for arm, value in arms.items() if arm.role is role}
    return Judgement(setting=setting, cases=named(cases, Role.ENGINE), results=named(results, Role.ENGINE), tolerance=tolerance,
                     oracle_cases=named(cases, Role.ORACLE), oracle=named(results, Role.ORACLE))


CONTRACT_QUANTITIES = ("result", "mesh")  # failures of the contract, not of the numbers: no finding excuses them


def numeric_failure(verdict: Verdict) -> bool:
    """A failing verdict whose failures are all numeric: only such a failure can be a pinned known
    finding (an invalid result or an unused mesh has margin inf, and would match any finding)."""
    failed = [c for c in verdict.comparisons if not c.passed]
    return verdict.status == FAIL and bool(failed) and not any(c.quantity in CONTRACT_QUANTITIES for c in failed)


def did_not_start(verdict: Verdict, failed: LaunchFailed) -> Verdict:
    """The verdict of a cell whose engine never got to its first case: hung while building, or failed."""
    verdict.status, verdict.detail = (HANG if failed.hung else ERROR), failed.text
    verdict.diagnosis = ("importing or constructing the engine hung: see the stacks" if failed.hung
                         else "the engine did not start: " + first_error_line(failed.text))
    return verdict


def judge(verdict: Verdict, scenario: Scenario, judgement: Judgement) -> None:
    """The scenario's judgement of the arms that ran, into `verdict`."""
    try:
        verdict.comparisons = scenario.judge(judgement)
    except Exception:  # noqa: BLE001 - a bug in packcheck's judge must not end the run
        verdict.status, verdict.diagnosis = ERROR, "packcheck's judge of this scenario crashed: a packcheck bug, not the engine's"
        verdict.detail += traceback.format_exc(limit=8)
        return
    failed = [c for c in verdict.comparisons if not c.passed]
    if not verdict.comparisons:  # every arm beyond the baseline was skipped: nothing was tested
        verdict.status = UNSUPPORTED
        verdict.detail += placement.NOTHING_TO_COMPARE
    elif failed:
        verdict.status = FAIL
        try:
            verdict.diagnosis = scenario.diagnose(judgement, failed)
        except Exception:  # noqa: BLE001 - a bug in packcheck's diagnosis must not end the run: the verdict stands
            verdict.diagnosis = "packcheck's diagnosis of this failure crashed (a packcheck bug, not the engine's): read the comparisons"
            verdict.detail += traceback.format_exc(limit=8)
        keep_obtained(verdict, scenario, judgement)


def keep_obtained(verdict: Verdict, scenario: Scenario, judged: Judgement) -> None:
    """A failing golden stage's results, written beside their golden for a diff (pytest-regressions'
    `.obtained`); where the goldens are not writable (an installed wheel), the verdict says so."""
    for stage in scenario.stages:
        arms = [name for name in stage.build(judged.setting, Before()) if name in judged.results] if stage.golden else []
        for name in arms:
            case = judged.cases[name]
            try:
                write_obtained(verdict.family, case, judged.results[name], provenance(case.device))
            except OSError as err:
                verdict.detail += f"the obtained result was not written beside the golden ({err}); the run's saved arms keep it\n"


def first_error_line(detail: str) -> str:
    """The first line that names an exception ("...Error: ..."), else the first line."""
    lines = [line.strip() for line in detail.splitlines() if line.strip() and not line.startswith(" ")]
    named = [line for line in lines if re.search(r"\w(Error|Exception|Exit|Interrupt)\b", line)]
    return (named[0] if named else lines[0] if lines else "no detail")[:300]


def save_arms(directory: Path, cases: dict[str, Case], results: dict[str, StepResult]) -> None:
    """Each arm's Case (JSON) and StepResult (safetensors + JSON), for reports and re-judging."""
    for name, result in results.items():
        arm = directory / name  # arm names are packcheck's own (an RL arm's holds '/': a folder per part)
        result.save(arm)
        (arm / "case.json").write_text(json.dumps(cases[name].to_json(), indent=1))

