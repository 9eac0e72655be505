"""The sensitivity proof: every mutant is flagged by each scenario that claims to catch its bug,
and the reference passes the same matrix (the conformance suite runs it on every family; here
once more beside the mutants so one failure report shows both directions).
"""

from __future__ import annotations

import pytest

from packcheck.harness.compare.bands import BUG_FLOAT64
from packcheck.harness.engines import mutant_names, resolve_engine
from packcheck.harness.golden.portability import PORTABLE_MARGIN
from packcheck.harness.scenarios import SCENARIOS
from tests.default_proofs import PROVEN_BY_DEFAULT, mutant_families, not_applicable
from tests.machine_load import stretched

# In float64 a clean engine sits ~1e-5 of the tolerance and a bug at least this many times above it (docs/margins.md;
# the float64 bug band the report prints): a signal below it would be one CPU's rounding away from being missed.
LOUD = BUG_FLOAT64
CLAIMS = [(scenario.name, bug) for scenario in SCENARIOS.values() for bug in scenario.catches]


def proof_cells(scenario: str, bug: str) -> list:
    """The (scenario, bug, family) cells that prove `scenario` flags the mutant, the slow ones marked (tests/default_proofs.py)."""
    declared, all_default = mutant_families(bug)
    slow = () if all_default else (pytest.mark.slow,)
    return [pytest.param(scenario, bug, family, id=f"{family}-{scenario}-{bug}", marks=() if family == PROVEN_BY_DEFAULT else slow)
            for family in sorted(declared)]


MUTANT_CELLS = [cell for scenario, bug in CLAIMS for cell in proof_cells(scenario, bug)]


def test_every_mutant_has_a_catching_scenario():
    bugs = {resolve_engine(name).bug for name in mutant_names()}
    claimed = {bug for _, bug in CLAIMS}
    assert bugs - claimed == set(), f"mutants no scenario claims to catch: {sorted(bugs - claimed)}"
    assert claimed - bugs == set(), f"scenarios claim bugs that have no mutant: {sorted(claimed - bugs)}"


# Mutants whose bug is a deadlock: the proof waits out the arm timeout, so their cells run at a timeout of their own,
# shorter than the session's 30 s (--arm-timeout) yet far above a healthy arm's few seconds, stretched by the load.
DEADLOCKS = frozenset({"rank-skips-step-without-tokens", "vision-skip-hang", "microbatch-count-not-equalised"})
DEADLOCK_TIMEOUT = 12.0


@pytest.mark.parametrize(("scenario_name", "bug", "family"), MUTANT_CELLS)
def test_scenario_flags_its_mutant(verdict_of, packcheck_inputs, packcheck_floors, scenario_name, bug, family):
    if bug in DEADLOCKS:  # in a pool of its own, with the session's inputs and floors
        from packcheck.harness.run.scenario_runner import RunOptions, run_scenario

        options = RunOptions(timeout=stretched(DEADLOCK_TIMEOUT), inputs=packcheck_inputs, noise_floors=packcheck_floors)
        verdict = run_scenario(f"mutant.{bug}", SCENARIOS[scenario_name], family, save_passing=False, options=options)
    else:
        verdict = verdict_of(f"mutant.{bug}", scenario_name, family)
    assert verdict.failed, f"{scenario_name} did not flag mutant.{bug}:\n{verdict.message()}"
    assert verdict.diagnosis, "a failing verdict must name the likely cause"
    if verdict.status == "hang":  # the deadlock itself (its cells run at DEADLOCK_TIMEOUT), not a slow arm cut off
        assert "a collective never completed" in verdict.diagnosis, verdict.message()
    worst = verdict.worst
    if verdict.status == "fail":  # errors and hangs carry no margin: the verdict itself is the signal
        assert worst.margin >= LOUD, f"the bug signal is too close to the tolerance: {worst.headline()}"


@pytest.mark.parametrize("family", sorted(resolve_engine("reference").capabilities.families))
@pytest.mark.parametrize("scenario_name", list(SCENARIOS))
def test_reference_passes_with_a_wide_margin(verdict_of, packcheck_inputs, scenario_name, family):
    verdict = verdict_of("reference", scenario_name, family)
    if why := not_applicable(scenario_name, family):  # e.g. ep_vs_noep on a dense family: the run says so and judges nothing
        assert verdict.status == "unsupported" and why in verdict.message(), verdict.message()
        return
    assert verdict.status == "pass", verdict.message()
    assert verdict.worst.margin < PORTABLE_MARGIN, f"clean margin too thin: {verdict.worst.headline()}"
