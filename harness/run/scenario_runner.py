"""Run one scenario against one engine: build the arms, run them, validate, judge, diagnose.

Arms of one process run in this process (under a watchdog); arms of a dp x cp mesh run through
`packcheck.harness.launch.run_distributed`, one launch per world size. Everything an engine does wrong
becomes a verdict, never an exception out of here: a declared unsupported arm -> unsupported;
UnsupportedCase for a case it declared supported, a crash on any rank -> error with the
traceback; a hang -> hang with every rank's state; an invalid StepResult -> fail naming every
broken field.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packcheck.harness.compare import HARNESS, Arms, Comparison, tolerance_for
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Engine, InvalidResult, UnsupportedCase, finding_for, validate_result
from packcheck.harness.golden import write_obtained
from packcheck.harness.models import model_spec
from packcheck.harness.provenance import provenance
from packcheck.harness.run.verdict import ERROR, FAIL, HANG, PASS, UNSUPPORTED, Verdict
from packcheck.harness.run.watchdog import Watchdog
from packcheck.harness.scenarios import Judgement, Scenario, Setting

DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    timeout: float = DEFAULT_TIMEOUT  # seconds per arm (per case on every rank)
    on_hang: Callable[[str], None] | None = None  # an in-process arm hung: record it; the process then exits
    workdir: Path | None = None  # where launches keep their files (a temporary directory if None)


def setting_for(family: str, dtype: str, device: str, attention: str = "auto") -> Setting:
    return Setting(family=family, dtype=dtype, device=device, attention=attention, model=model_spec(family))


class ArmProblem(Exception):
    """An arm ended the verdict: `status` and `detail` say how."""

    def __init__(self, status: str, detail: str, comparison: Comparison | None = None):
        super().__init__(detail)
        self.status, self.detail, self.comparison = status, detail, comparison


def accept(engine: Engine, name: str, case: Case, result: object) -> StepResult:
    try:
        return validate_result(engine.name, case, result)
    except InvalidResult as invalid:
        comparison = Comparison(arms=Arms(name, HARNESS), quantity="result", item="", metric="invalid",
                                observed=float(len(invalid.problems)), threshold=0.0, where=invalid.problems[0])
        raise ArmProblem(FAIL, str(invalid), comparison) from None


def run_in_process(engine: Engine, name: str, case: Case, options: RunOptions) -> StepResult:
    try:
        with Watchdog(options.timeout if options.on_hang else 0, options.on_hang or (lambda stacks: None)):
            result = engine.run(case)
    except UnsupportedCase as err:
        raise ArmProblem(ERROR, f"arm {name!r}: engine raised UnsupportedCase for a case its capabilities declare supported: "
                                f"{err}. Fix the declaration or the engine.") from None
    except Exception:  # noqa: BLE001 - any engine crash becomes a verdict
        raise ArmProblem(ERROR, f"arm {name!r} ({case.describe()}) crashed:\n{traceback.format_exc(limit=8)}") from None
    return accept(engine, name, case, result)


def run_launched(engine: Engine, cases: dict[str, Case], options: RunOptions) -> dict[str, StepResult]:
    """The arms of one world size > 1, in one launch; the first that errs or hangs ends the verdict."""
    from packcheck.harness.launch import ERROR as LAUNCH_ERROR
    from packcheck.harness.launch import HANG as LAUNCH_HANG
    from packcheck.harness.launch import engine_spec, run_distributed

    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="packcheck-launch-"))
    device = next(iter(cases.values())).device
    outcomes = run_distributed(engine_spec(engine), list(cases.values()), device, options.timeout, workdir)
    results = {}
    for (name, case), outcome in zip(cases.items(), outcomes):
        if outcome.status == LAUNCH_HANG:
            raise ArmProblem(HANG, f"arm {name!r} ({case.describe()}):\n{outcome.hang.describe()}")
        if outcome.status == LAUNCH_ERROR and (outcome.error_type or "").endswith(".UnsupportedCase"):
            raise ArmProblem(ERROR, f"arm {name!r}: a rank raised UnsupportedCase for a case the engine declares supported: "
                                    f"fix the declaration or the engine.\n{outcome.error}")
        if outcome.status == LAUNCH_ERROR:
            raise ArmProblem(ERROR, f"arm {name!r} ({case.describe()}) failed:\n{outcome.error}")
        results[name] = accept(engine, name, case, outcome.result)
    return results


DIAGNOSES = {
    FAIL: lambda problem: f"the engine broke the result contract: {problem.comparison.where}",
    ERROR: lambda problem: "the engine crashed: " + first_error_line(problem.detail),
    HANG: lambda problem: "a collective never completed on some rank (deadlock): see the per-rank states and stacks",
}


def run_arms(engine: Engine, scenario: Scenario, cases: dict[str, Case], verdict: Verdict, options: RunOptions) -> dict[str, StepResult] | None:
    """Run every arm the engine supports; on a problem fill `verdict` in and return None."""
    by_world: dict[int, dict[str, Case]] = defaultdict(dict)
    for name, case in cases.items():
        reason = engine.unsupported_reason(case)
        if reason is None:
            by_world[case.parallel.world_size][name] = case
        elif name in scenario.optional_arms:
            verdict.detail += f"arm {name!r} skipped: {reason}\n"
            verdict.skipped_arms.append(name)
        else:
            verdict.status, verdict.detail = UNSUPPORTED, f"arm {name!r}: {reason}"
            return None
    results: dict[str, StepResult] = {}
    try:
        for world, group in sorted(by_world.items()):
            if world == 1:
                results |= {name: run_in_process(engine, name, case, options) for name, case in group.items()}
            else:
                results |= run_launched(engine, group, options)
    except ArmProblem as problem:
        verdict.status, verdict.detail = problem.status, verdict.detail + problem.detail
        verdict.diagnosis = DIAGNOSES[problem.status](problem)
        if problem.comparison is not None:
            verdict.comparisons.append(problem.comparison)
        return None
    return {name: results[name] for name in cases if name in results}


def run_scenario(engine: Engine, scenario: Scenario, family: str, dtype: str = "float64", device: str = "cpu",
                 save_dir: Path | None = None, attention: str = "auto", save_passing: bool = True,
                 options: RunOptions = RunOptions()) -> Verdict:
    """Judge `engine` on `scenario`; with `save_dir`, keep each arm's case and result there
    (only for failing verdicts unless `save_passing`)."""
    started = time.perf_counter()
    verdict = Verdict(engine=engine.name, family=family, scenario=scenario.name, dtype=dtype, device=device, status=PASS,
                      attention=attention)
    setting = setting_for(family, dtype, device, attention)
    cases = scenario.build(setting)
    results = run_arms(engine, scenario, cases, verdict, options)
    if results is not None and scenario.follow_up is not None:
        later = scenario.follow_up(setting, results)
        cases |= later
        later_results = run_arms(engine, scenario, later, verdict, options)
        results = None if later_results is None else results | later_results
    if results is not None:
        judgement = Judgement(setting=setting, cases=cases, results=results, tolerance=tolerance_for(dtype))
        try:
            verdict.comparisons = scenario.judge(judgement)
        except Exception:  # noqa: BLE001 - a bug in packcheck's judge must not end the run
            verdict.status, verdict.diagnosis = ERROR, "packcheck's judge of this scenario crashed: a packcheck bug, not the engine's"
            verdict.detail += traceback.format_exc(limit=8)
            verdict.seconds = time.perf_counter() - started
            return verdict
        failed = [c for c in verdict.comparisons if not c.passed]
        if not verdict.comparisons:  # every arm beyond the baseline was skipped: nothing was tested
            verdict.status = UNSUPPORTED
            verdict.detail += "no arm beyond the baseline is supported by the engine: nothing to compare"
        elif failed:
            verdict.status = FAIL
            verdict.diagnosis = scenario.diagnose(judgement, failed)
            keep_obtained(verdict, scenario, cases, results)
        if save_dir is not None and (save_passing or verdict.failed):
            save_arms(save_dir, cases, results)
    finding = finding_for(engine.known_findings, scenario.name, family)
    if finding is not None and verdict.status == FAIL and verdict.worst is not None and verdict.worst.margin >= finding.min_margin:
        verdict.known_finding = finding.headline()
    verdict.seconds = time.perf_counter() - started
    return verdict


def keep_obtained(verdict: Verdict, scenario: Scenario, cases: dict[str, Case], results: dict[str, StepResult]) -> None:
    """A failing golden scenario's result, written beside the golden for a diff (pytest-regressions'
    `.obtained`); where the goldens are not writable (an installed wheel), the verdict says so."""
    arm = scenario.golden_arm
    if arm is None or arm not in results:
        return
    try:
        write_obtained(verdict.family, cases[arm], results[arm], provenance(cases[arm].device))
    except OSError as err:
        verdict.detail += f"the obtained result was not written beside the golden ({err}); the run's saved arms keep it\n"


def first_error_line(detail: str) -> str:
    """The first line that names an exception ("...Error: ..."), else the first line."""
    lines = [line.strip() for line in detail.splitlines() if line.strip() and not line.startswith(" ")]
    named = [line for line in lines if re.search(r"\w(Error|Exception)\b", line)]
    return (named[0] if named else lines[0] if lines else "no detail")[:300]


def save_arms(directory: Path, cases: dict[str, Case], results: dict[str, StepResult]) -> None:
    """Each arm's Case (JSON) and StepResult (safetensors + JSON), for reports and re-judging."""
    for name, result in results.items():
        result.save(directory / name)
        (directory / name / "case.json").write_text(json.dumps(cases[name].to_json(), indent=1))
