"""What each scenario of a run checks, in a sentence for the report (its invariant from the registry), and where the
rest is said: `packcheck explain SCENARIO` (the arms, the tolerance per quantity and dtype, the bugs it catches)."""

from __future__ import annotations

from packcheck.harness.scenarios import SCENARIOS


def scenario_texts(names: list[str]) -> list[dict]:
    """One {name, checks, explain} per scenario of the run, in the run's order; a name the registry no longer has
    (an older run's results) is said to be unknown here."""
    return [{"name": name, "checks": SCENARIOS[name].invariant if name in SCENARIOS else "(not a scenario of this packcheck)",
             "explain": f"packcheck explain {name}"} for name in names]
