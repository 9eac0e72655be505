"""pytest plugin for packcheck: engine/family/dtype/device options and hypothesis profiles.

`pytest conformance --engine mypkg.adapter:Engine` runs the conformance suite against any engine;
the defaults run the reference engine on every family it supports, in float64 on CPU. Nothing
heavy is imported until a test needs it.
"""

from __future__ import annotations

import functools
import os

import pytest
from hypothesis import HealthCheck, settings

# Each third-party adapter's own tests need its pinned extra (a separate environment): its nox
# session runs them by path (`nox -s "adapters(adapter='trl_sft')"`); a plain `pytest` does not collect them.
collect_ignore = ["tests/adapters"]

OPTIONS = (
    ("--engine", "reference", "engine under test: a registered name or 'package.module:Class' (default: reference)"),
    ("--dtype", "float64", "dtype of the conformance cases (default: float64)"),
    ("--device", "cpu", "device of the conformance cases (default: cpu)"),
    ("--attention", "auto", "attention backend the cases ask for (default: auto, the engine's choice)"),
    ("--arm-timeout", "30", "seconds one arm may run before it is judged hung (default: 30; packcheck run's default is 600)"),
)

settings.register_profile("ci", derandomize=True, max_examples=12, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("PACKCHECK_HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (inherited by the ranks it launches),
    so N workers do not each start threads and ranks for the whole machine."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        share = str(max(1, (os.cpu_count() or 1) // workers))
        os.environ["OMP_NUM_THREADS"] = share
        import torch

        torch.set_num_threads(int(share))


def pytest_addoption(parser):
    group = parser.getgroup("packcheck")
    for flag, default, help_text in OPTIONS:
        group.addoption(flag, default=default, help=help_text)
    group.addoption("--family", action="append", default=None,
                    help="model family, repeatable (default: every family the engine supports)")


def pytest_report_header(config):
    families = config.getoption("--family") or "all supported"
    return (f"packcheck: engine={config.getoption('--engine')} families={families} dtype={config.getoption('--dtype')} "
            f"device={config.getoption('--device')} attention={config.getoption('--attention')} hypothesis-profile={settings._current_profile}")


@pytest.fixture(scope="session")
def verdict_of(pytestconfig):
    """verdict_of(engine_spec, scenario, family, dtype="float64", device="cpu", attention="auto"):
    run once per session and shared, because the conformance suite and the mutant proof judge
    the same reference cells (multi-process ones cost seconds each)."""
    from harness.engines import resolve_engine
    from harness.run.scenario_runner import RunOptions, run_scenario
    from harness.scenarios import SCENARIOS

    options = RunOptions(timeout=float(pytestconfig.getoption("--arm-timeout")))

    @functools.cache
    def run(engine: str, scenario: str, family: str, dtype: str, device: str, attention: str):
        return run_scenario(resolve_engine(engine), SCENARIOS[scenario], family, dtype, device, attention=attention, options=options)

    def verdict(engine: str, scenario: str, family: str, dtype: str = "float64", device: str = "cpu", attention: str = "auto"):
        return run(engine, scenario, family, dtype, device, attention)  # one cache key whether defaults are spelled out or not

    return verdict


# Under pytest-xdist (the nox tests session), the conformance suite and the mutant proof judge the same
# reference cells: each cell's tests go to one worker, which runs the cell once (the verdict_of cache).
SHARED_CELL_TESTS = {"test_scenario": "scenario", "test_reference_passes_with_a_wide_margin": "scenario_name"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        scenario_param = SHARED_CELL_TESTS.get(getattr(item, "originalname", ""))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if scenario_param in params and "family" in params:
            scenario = params[scenario_param]
            item.add_marker(pytest.mark.xdist_group(f"{getattr(scenario, 'name', scenario)}-{params['family']}"))


# `packcheck run` exits 2 when an engine supports none of the scenarios; the conformance suite must not go
# green for such an engine either (every cell skipped as unsupported would read as a clean run in CI).
_scenario_outcomes: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.skipped):
        if "conformance/test_scenarios.py::test_scenario" in report.nodeid:
            _scenario_outcomes.append("xfailed" if hasattr(report, "wasxfail") else report.outcome)


def pytest_sessionfinish(session, exitstatus):
    if _scenario_outcomes and all(outcome == "skipped" for outcome in _scenario_outcomes) and exitstatus == 0:
        engine = session.config.getoption("--engine")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"packcheck: engine {engine!r} supports none of the {len(_scenario_outcomes)} scenario cells: "
                                "nothing was tested (see the skip reasons above)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

