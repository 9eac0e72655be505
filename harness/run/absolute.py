"""Whether a run checked each engine absolutely: no green run without one.

The scenarios that compare arms of one engine with each other pass a model that is wrong the same way in
every arm. Three judge an engine against the float64 reference instead (their entries say so: Scenario.absolute):
oracle_agreement (every engine), golden_regression (the stored goldens) and gradient_oracle (an engine reporting
dloss_dlogprobs). A run
that selected any of them and in which none passed for an engine and family (unsupported: the reference
cannot model the family, say) checked that engine on that family only for self-consistency: the summary
says so and `packcheck run` exits 2, as for a run that tested nothing, unless --relative-only accepts it.
A run whose --scenario names none of them asked for relative checks only, and the summary says that too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packcheck.harness.judging.status import Status
from packcheck.harness.scenarios import SCENARIOS


def absolute(scenario: str) -> bool:
    """Whether the scenario so named is an absolute check (its entry says: Scenario.absolute)."""
    return scenario in SCENARIOS and SCENARIOS[scenario].absolute


def unanchored(cells: Iterable[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """(engine, family, why) for each engine and family of `cells` (engine, family, scenario, status) in which an
    absolute scenario was judged and none passed; why: what became of its absolute verdicts."""
    seen: dict[tuple[str, str], list[tuple[str, Status]]] = {}
    for engine, family, scenario, status in cells:
        if absolute(scenario):
            seen.setdefault((engine, family), []).append((scenario, Status(status)))
    return [(engine, family, ", ".join(f"{scenario} {status}" for scenario, status in got)) for (engine, family), got in seen.items()
            if not any(status.held for _, status in got)]


def absolute_summary(cells: Sequence[tuple[str, str, str, str]], relative_only: bool) -> str:
    """The summary's line about absolute checks ("" when every engine and family passed one)."""
    if cells and not any(absolute(scenario) for _, _, scenario, _ in cells):
        named = ", ".join(name for name in SCENARIOS if absolute(name))
        return f"relative-only run: no absolute check was selected ({named}): a model wrong in every arm passes it"
    missing = unanchored(cells)
    if not missing:
        return ""
    named = "; ".join(f"{engine} on {family} ({why})" for engine, family, why in missing)
    verdict = ("accepted: --relative-only" if relative_only
               else "the run is not green; --relative-only accepts a run checked only for self-consistency")
    return (f"no absolute check passed for {named}: the engine was checked only against itself, and a model wrong the same "
            f"way in every arm passes that; {verdict}")
