"""Fixtures of the conformance suite: the engine under test and the cells of the matrix."""

from __future__ import annotations

import pytest


def families(config) -> list:
    """--family, else every family the engine declares (its description, from its own process) that --model fits; none
    of them: one skipped cell that says why, which fails the session (plugin.py: nothing was tested)."""
    from packcheck.conformance.plugin import run_choices, session_pool
    from packcheck.harness.launch import LaunchFailed
    from packcheck.harness.models import FAMILIES
    from packcheck.harness.run.untested import no_family

    choices = run_choices(config)
    if config.getoption("--family"):
        return choices.families
    spec = choices.engines[0]
    offered = sorted(choices.families or FAMILIES)
    try:
        declared = session_pool(config).engine_info(spec, choices.device).capabilities.families
    except LaunchFailed as failed:
        raise pytest.UsageError(f"--engine {spec}: the engine did not start:\n{failed.text}") from None
    if not (chosen := sorted(set(offered) & declared)):  # "got empty parameter set" said nothing of why; the session fails
        return [pytest.param("none", marks=pytest.mark.skip(reason=f"--engine {spec} {no_family(declared, offered)}"))]
    return chosen


def pytest_generate_tests(metafunc):
    if "family" in metafunc.fixturenames:
        metafunc.parametrize("family", families(metafunc.config))
    if "scenario" in metafunc.fixturenames:
        from packcheck.conformance.plugin import run_choices

        scenarios = run_choices(metafunc.config).scenarios
        metafunc.parametrize("scenario", scenarios, ids=[scenario.name for scenario in scenarios])


def pytest_collection_modifyitems(config, items):
    """The cells of a scenario that judges arms drawn from the others (oracle_agreement: harness/run/spot_checks.py) run
    after the others. --scenario: the property tests of the scenarios left out are deselected too (their cells are never
    generated)."""
    items.sort(key=takes_spot_arms)  # stable: every other item keeps its place
    chosen = config.getoption("--scenario")
    if not chosen:
        return
    from packcheck.conformance.plugin import SCENARIO_MARKER

    left_out = [item for item in items if (marker := item.get_closest_marker(SCENARIO_MARKER)) and marker.args[0] not in chosen]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def takes_spot_arms(item) -> bool:
    scenario = getattr(getattr(item, "callspec", None), "params", {}).get("scenario")
    return bool(getattr(scenario, "takes_spot_arms", False))


@pytest.fixture(scope="session")
def engine(pytestconfig, packcheck_pool, device):
    """The engine under test as the harness knows it: its description, from its own process (EngineInfo)."""
    from packcheck.conformance.plugin import run_choices

    return packcheck_pool.engine_info(run_choices(pytestconfig).engines[0], device)


@pytest.fixture(scope="session")
def dtype(request, pytestconfig) -> str:
    """--dtype; with auto, the most precise dtype the engine declares (conformance/plugin.py, chosen_dtype)."""
    from packcheck.conformance.plugin import chosen_dtype

    return chosen_dtype(pytestconfig, request.getfixturevalue("engine") if pytestconfig.getoption("--dtype") == "auto" else None)


@pytest.fixture(scope="session")
def device(pytestconfig) -> str:
    return pytestconfig.getoption("--device")


@pytest.fixture(scope="session")
def attention(pytestconfig) -> str:
    return pytestconfig.getoption("--attention")
