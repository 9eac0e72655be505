"""Run one scenario against one engine: build the arms, run them, validate, judge, diagnose.

Everything an engine does wrong becomes a verdict, never an exception out of here: a declared
unsupported arm -> unsupported; UnsupportedCase for a case it declared supported, a crash ->
error with the traceback; an invalid StepResult -> fail naming every broken field.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from harness.compare import Comparison, tolerance_for
from harness.contract import Case, StepResult
from harness.engines import Engine, InvalidResult, UnsupportedCase, validate_result
from harness.models import model_spec
from harness.run.verdict import ERROR, FAIL, PASS, UNSUPPORTED, Verdict
from harness.scenarios import Judgement, Scenario, Setting


def setting_for(family: str, dtype: str, device: str, attention: str = "auto") -> Setting:
    return Setting(family=family, dtype=dtype, device=device, attention=attention, model=model_spec(family))


def run_arms(engine: Engine, scenario: Scenario, cases: dict[str, Case], verdict: Verdict) -> dict[str, StepResult] | None:
    """Run every arm the engine supports; on a problem fill `verdict` in and return None."""
    results: dict[str, StepResult] = {}
    for name, case in cases.items():
        reason = engine.unsupported_reason(case)
        if reason is not None:
            if name in scenario.optional_arms:
                verdict.detail += f"arm {name!r} skipped: {reason}\n"
                continue
            verdict.status, verdict.detail = UNSUPPORTED, f"arm {name!r}: {reason}"
            return None
        try:
            results[name] = validate_result(engine.name, case, engine.run(case))
        except InvalidResult as invalid:
            verdict.status = FAIL
            verdict.comparisons.append(Comparison(arms=name, quantity="result", item="", metric="invalid",
                                                  observed=float(len(invalid.problems)), threshold=0.0, where=invalid.problems[0]))
            verdict.detail = str(invalid)
            return None
        except UnsupportedCase as err:
            verdict.status = ERROR
            verdict.detail = f"arm {name!r}: engine raised UnsupportedCase for a case its capabilities declare supported: {err}. Fix the declaration or the engine."
            return None
        except Exception:  # noqa: BLE001 - any engine crash becomes a verdict
            verdict.status = ERROR
            verdict.detail = f"arm {name!r} ({case.describe()}) crashed:\n{traceback.format_exc(limit=8)}"
            return None
    return results


def run_scenario(engine: Engine, scenario: Scenario, family: str, dtype: str = "float64", device: str = "cpu",
                 save_dir: Path | None = None, attention: str = "auto", save_passing: bool = True) -> Verdict:
    """Judge `engine` on `scenario`; with `save_dir`, keep each arm's case and result there
    (only for failing verdicts unless `save_passing`)."""
    started = time.perf_counter()
    verdict = Verdict(engine=engine.name, family=family, scenario=scenario.name, dtype=dtype, device=device, status=PASS,
                      attention=attention)
    setting = setting_for(family, dtype, device, attention)
    cases = scenario.build(setting)
    results = run_arms(engine, scenario, cases, verdict)
    if results is not None and scenario.follow_up is not None:
        later = scenario.follow_up(setting, results)
        cases |= later
        later_results = run_arms(engine, scenario, later, verdict)
        results = None if later_results is None else results | later_results
    if results is not None:
        judgement = Judgement(setting=setting, cases=cases, results=results, tolerance=tolerance_for(dtype))
        verdict.comparisons = scenario.judge(judgement)
        failed = [c for c in verdict.comparisons if not c.passed]
        if failed:
            verdict.status = FAIL
            verdict.diagnosis = scenario.diagnose(judgement, failed)
        if save_dir is not None and (save_passing or verdict.failed):
            save_arms(save_dir, cases, results)
    elif verdict.status == FAIL:
        verdict.diagnosis = f"the engine broke the result contract: {verdict.comparisons[-1].where}"
    verdict.seconds = time.perf_counter() - started
    return verdict


def save_arms(directory: Path, cases: dict[str, Case], results: dict[str, StepResult]) -> None:
    """Each arm's Case (JSON) and StepResult (safetensors + JSON), for reports and re-judging."""
    import json

    for name, result in results.items():
        result.save(directory / name)
        (directory / name / "case.json").write_text(json.dumps(cases[name].to_json(), indent=1))
