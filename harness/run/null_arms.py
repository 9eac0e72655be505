"""The nulls a pass measures where only gradient rows within reach of one fail it: each base arm those rows were compared
against, run again by the same engine in a dtype that rounds less, and its gradients compared with the run's
(harness/compare/null_bound.py says what a null allows and why).

A null is measured only where it can decide the verdict: in a dtype that rounds, when every failing row is a gradient
compared against an engine arm and within NULL_CEILING x its table. A null only raises thresholds, so a pass the table
passes is judged exactly as before and costs nothing more; a pass that fails on anything a null cannot lift fails as the
table says, without the extra arms. A null arm the engine cannot run (declined, crashed, hung, invalid) leaves its rows
to the table, and the verdict says why.
"""

from __future__ import annotations

from packcheck.harness.compare import ArmId, Arms, Comparison, Role, Tolerance, compare_tensors
from packcheck.harness.compare.bound import Source
from packcheck.harness.compare.null_bound import HIGHER, NULL_CEILING, NULL_FACTOR, GradientNull
from packcheck.harness.engines import EngineInfo
from packcheck.harness.launch import LaunchPool
from packcheck.harness.launch.capacity import cannot_host
from packcheck.harness.run.execution import Execution
from packcheck.harness.run.outcomes import ArmOutcome, Kind, accept

TABLE_SOURCES = (Source.TABLE, Source.CALIBRATED)


def bases_to_measure(failed: list[Comparison], dtype: str) -> list[ArmId]:
    """The engine arms whose nulls could turn this pass's failures into passes, or none where some failure is out of reach."""
    if dtype not in HIGHER or not failed or not all(within_reach(row) for row in failed):
        return []
    return sorted({row.arms.against for row in failed})


def within_reach(row: Comparison) -> bool:
    against = row.arms.against
    return (row.quantity == "grad" and isinstance(against, ArmId) and against.role is Role.ENGINE
            and row.bound.source in TABLE_SOURCES and row.observed <= NULL_CEILING * row.threshold)


def measure_nulls(engine: EngineInfo, run: Execution, bases: list[ArmId], pool: LaunchPool,
                  tol: Tolerance) -> tuple[dict[str, GradientNull], list[str]]:
    """Each base's null, by its name, and a note for each: what it judges, or why it could not be measured."""
    nulls, notes = {}, []
    stages = {o.arm: o.stage for o in run.outcomes}
    for base in bases:
        case = run.cases[base]
        dtype = HIGHER[case.dtype]
        higher = case.with_(name=f"{case.name}@{dtype}", dtype=dtype)
        arm = ArmId(higher.name, Role.ENGINE, base.pass_)
        reason = engine.unsupported_reason(higher) or cannot_host(higher)
        outcome = None if reason else accept(engine, arm, higher, stages[base], pool.run(engine.spec, higher), optional=False)
        if outcome is None or outcome.kind is not Kind.RAN:
            what = reason or ended(outcome)
            notes.append(f"no null of {base.local} in {dtype} ({what}); its gradient rows keep the table")
            continue
        rows = compare_tensors(Arms(arm, base), "grad", run.results[base].grads, outcome.result.grads, tol)
        errors: dict[str, dict[str, float]] = {}
        for row in rows:
            errors.setdefault(row.item, {})[row.metric] = row.observed
        nulls[base.name] = GradientNull(arm=base.name, dtype=case.dtype, errors=errors)
        notes.append(f"the gradient rows against {base.local} are judged by max(table, {NULL_FACTOR:g} x its null): the table "
                     f"alone failed some, so the engine ran it again in {dtype} (harness/compare/null_bound.py)")
    return nulls, notes


def ended(outcome: ArmOutcome) -> str:
    said = outcome.reason or outcome.cause or (outcome.problems[0].sentence if outcome.problems else "")
    return f"it ended {outcome.kind.value}" + (f": {said}" if said else "")
