"""Fixtures of the conformance suite: the engine under test and the cells of the matrix."""

from __future__ import annotations

import pytest


def families(config) -> list[str]:
    """--family, else every family the engine declares (its description, from its own process) that --model fits."""
    from packcheck.conformance.plugin import run_inputs, session_pool
    from packcheck.harness.launch import LaunchFailed
    from packcheck.harness.models import FAMILIES

    chosen = config.getoption("--family")
    if chosen:
        return chosen
    fitting = run_inputs(config)[1] or FAMILIES
    spec = config.getoption("--engine")
    try:
        return sorted(set(fitting) & session_pool(config).engine_info(spec, config.getoption("--device")).capabilities.families)
    except LaunchFailed as failed:
        raise pytest.UsageError(f"--engine {spec}: the engine did not start:\n{failed.text}") from None


def pytest_generate_tests(metafunc):
    if "family" in metafunc.fixturenames:
        metafunc.parametrize("family", families(metafunc.config))
    if "scenario" in metafunc.fixturenames:
        from packcheck.harness.scenarios import SCENARIOS

        metafunc.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))


@pytest.fixture(scope="session")
def engine(pytestconfig, packcheck_pool):
    """The engine under test as the harness knows it: its description, from its own process (EngineInfo)."""
    return packcheck_pool.engine_info(pytestconfig.getoption("--engine"), pytestconfig.getoption("--device"))


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
