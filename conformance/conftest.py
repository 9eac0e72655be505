"""Fixtures of the conformance suite: the engine under test and the cells of the matrix."""

from __future__ import annotations

import pytest


def _engine(config):
    from packcheck.harness.engines import resolve_engine

    return resolve_engine(config.getoption("--engine"))


def families(config) -> list[str]:
    from packcheck.harness.models import FAMILIES

    chosen = config.getoption("--family")
    return chosen or sorted(set(FAMILIES) & _engine(config).capabilities.families)


def pytest_generate_tests(metafunc):
    if "family" in metafunc.fixturenames:
        metafunc.parametrize("family", families(metafunc.config))
    if "scenario" in metafunc.fixturenames:
        from packcheck.harness.scenarios import SCENARIOS

        metafunc.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))


@pytest.fixture(scope="session")
def engine(pytestconfig):
    return _engine(pytestconfig)


@pytest.fixture(scope="session")
def dtype(pytestconfig) -> str:
    return pytestconfig.getoption("--dtype")


@pytest.fixture(scope="session")
def device(pytestconfig) -> str:
    return pytestconfig.getoption("--device")


@pytest.fixture(scope="session")
def attention(pytestconfig) -> str:
    return pytestconfig.getoption("--attention")
