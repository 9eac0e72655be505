"""Localise a verdict from a run's files (`packcheck localise RUN_DIR/VERDICT`): the verdict and its comparison rows
from results.json(l), the inputs from its provenance, the two arms matched by their recorded identity among the arms
the scenario's plan rebuilds (harness/run/localise.py does the rest)."""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.compare.divergence import Divergence, unavailable
from packcheck.harness.errors import InputError
from packcheck.harness.judging.status import Status
from packcheck.harness.launch import LaunchFailed, LaunchPool
from packcheck.harness.run.calibration import floors_from_report
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.localise import localise, plan_arms
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.localisations import verdict_key
from packcheck.harness.run_dir.results import load_results
from packcheck.harness.compare import Pass
from packcheck.harness.scenarios import get_scenario
from packcheck.harness.text import path_name


def failing_verdicts(path: Path) -> tuple[RunDir, list[dict]]:
    """The run directory above `path` and the failing verdicts of the ENGINE/FAMILY/SCENARIO below it."""
    path = path.resolve()
    found = RunDir.find(path)
    if found is None:
        raise InputError(f"{path}: no run directory (one holding results.json or results.jsonl) contains it; "
                         "give RUN_DIR/ENGINE/FAMILY/SCENARIO")
    run_dir, parts = found
    if len(parts) != 3:
        raise InputError(f"{path}: after the run directory {run_dir.path}, give ENGINE/FAMILY/SCENARIO (found {'/'.join(parts) or 'nothing'})")
    engine, family, scenario = parts
    data = load_results(run_dir)
    found = [v for v in data.get("verdicts", []) if (path_name(str(v["engine"])), v["family"], v["scenario"]) == (engine, family, scenario)
             and v["status"] == Status.FAIL]
    return run_dir, found


def localise_recorded(run_dir: RunDir, verdict: dict, pool: LaunchPool) -> Divergence:
    """Where the recorded verdict's worst failing comparison between two arms first parts."""
    data = load_results(run_dir)
    key = verdict_key(verdict)
    rows = [r for r in data.get("rows", []) if verdict_key(r) == key and not r["passed"] and r.get("against_role")]
    if not rows:
        return unavailable("", "", "no failing comparison is between two arms (the failures are against the harness's own "
                                   "definition or a golden): there is no second run to compare modules with")
    row = max(rows, key=lambda r: float(r["margin"]))
    scenario = get_scenario(verdict["scenario"])
    recorded = (data.get("provenance") or {}).get("inputs") or {}
    inputs = Inputs(model=str(recorded.get("model", Inputs().model)), seed=int(recorded.get("seed", 0)),
                    data_scale=recorded.get("data_scale"))
    setting = inputs.setting(verdict["family"], verdict["dtype"], verdict["device"], verdict.get("attention") or "auto")
    try:
        engine = pool.engine_info(verdict.get("engine_spec") or verdict["engine"], verdict["device"])
    except LaunchFailed as failed:
        return unavailable(row["arm"], row["against"], f"the engine did not start: {failed.text.splitlines()[0] if failed.text else ''}")
    known = {str(arm): arm for pass_ in Pass for arm in plan_arms(scenario, setting, pass_)}
    if row["arm"] not in known or row["against"] not in known:
        return unavailable(row["arm"], row["against"], "the plan rebuilt from the run's inputs has no such arms (another packcheck version?)")
    floors_file = (data.get("provenance") or {}).get("noise_floors")  # the run's own calibration (--noise-floors), where it had one
    floors = floors_from_report(floors_file) if floors_file else None
    return localise(engine, scenario, setting, known[row["arm"]], known[row["against"]], pool, floors)
