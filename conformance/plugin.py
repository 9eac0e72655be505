"""The packcheck pytest plugin, registered through the `pytest11` entry point: installed with
packcheck, it is active in any repository.

    pip install packcheck
    pytest --pyargs packcheck.conformance --engine mypkg.adapter:MyEngine [--family llama] [--dtype float32|auto]
        [--model 0.6b] [--seed 1] [--data-scale 85]

Options live in one "packcheck" group, each help text states its default; the report header shows
what runs. The plugin imports nothing heavy until a test asks for `verdict_of`, `run_arm` or `packcheck_pool`
(every arm runs in the engine's own processes, never in pytest's), and it changes
nothing global: its hypothesis profiles are registered under packcheck's own names and used only
by packcheck's property tests (conformance/known_findings.py).
"""

from __future__ import annotations

import functools
import os

import pytest
from hypothesis import HealthCheck, settings

OPTIONS = (
    ("--engine", "reference", "engine under test: a registered name or 'package.module:Class' (default: reference)"),
    ("--dtype", "float64", "dtype of the conformance cases: float64 | float32 | bfloat16 | auto: the most precise dtype the engine's "
                           "Capabilities.dtypes declare (default: float64)"),
    ("--device", "cpu", "device of the conformance cases (default: cpu)"),
    ("--attention", "auto", "attention backend the cases ask for (default: auto, the engine's choice)"),
    ("--arm-timeout", "30", "seconds one arm may run before it is judged hung (default: 30; packcheck run's default is 600)"),
)
# the scenario cells of the conformance suite carry this marker: a run where every one is skipped tested nothing
CELL_MARKER = "packcheck_cell"

PROFILES = {
    "ci": dict(derandomize=True, max_examples=12, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]),
    "dev": dict(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
}
for _name, _values in PROFILES.items():
    settings.register_profile(f"packcheck-{_name}", **_values)


def hypothesis_profile() -> str:
    """packcheck's property tests run under packcheck-<PACKCHECK_HYPOTHESIS_PROFILE> (default: ci, derandomized)."""
    return f"packcheck-{os.environ.get('PACKCHECK_HYPOTHESIS_PROFILE', 'ci')}"


def pytest_addoption(parser):
    group = parser.getgroup("packcheck", "packcheck conformance suite")
    for flag, default, help_text in OPTIONS:
        group.addoption(flag, default=default, help=help_text)
    group.addoption("--family", action="append", default=None,
                    help="model family, repeatable (default: every family the engine supports)")
    # what every case is built from, as `packcheck run` takes it (harness/run/inputs.py)
    group.addoption("--model", default="tiny",
                    help="a size preset of each family (tiny, 0.6b, 1b: `packcheck list families`) or a directory holding a "
                         "Hugging Face config.json, with its safetensors or seeded weights (default: tiny)")
    group.addoption("--seed", type=int, default=0, help="seed of every generated input, weights included; 0 is the goldens' (default: 0)")
    group.addoption("--data-scale", type=int, default=None,
                    help="documents and packed rows this many times longer, odd (default: the model's: 1 for tiny, 85 for 0.6b/1b)")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{CELL_MARKER}: a scenario x family cell of the packcheck conformance suite")
    if (config.getoption("--model"), config.getoption("--seed"), config.getoption("--data-scale")) != ("tiny", 0, None):
        run_inputs(config)  # what no run can take is a usage error before anything runs


def pytest_report_header(config):
    families = config.getoption("--family") or "all supported"
    scale = config.getoption("--data-scale")
    return (f"packcheck: engine={config.getoption('--engine')} families={families} dtype={config.getoption('--dtype')} "
            f"device={config.getoption('--device')} attention={config.getoption('--attention')} model={config.getoption('--model')} "
            f"seed={config.getoption('--seed')}" + (f" data-scale={scale}" if scale is not None else "")
            + f" hypothesis-profile={hypothesis_profile()}")


INPUTS = pytest.StashKey()
DTYPE_CHOICE = pytest.StashKey()


def run_inputs(config):
    """(Inputs, families) of --model, --seed and --data-scale, checked as `packcheck run` checks them
    (harness/run/inputs.py): the families are those the model fits, None for every family the engine supports."""
    if INPUTS not in config.stash:
        from packcheck.harness.errors import InputError
        from packcheck.harness.run.inputs import checked_inputs

        try:
            config.stash[INPUTS] = checked_inputs(config.getoption("--model"), config.getoption("--seed"), config.getoption("--data-scale"),
                                                  config.getoption("--family"))
        except InputError as err:
            raise pytest.UsageError(str(err)) from None
    return config.stash[INPUTS]


def chosen_dtype(config, info) -> str:
    """--dtype, or with --dtype auto the most precise dtype the engine declares (harness/run/dtype_choice.py), kept
    for the terminal summary; an engine that declares none is a usage error naming the field."""
    from packcheck.harness.run.dtype_choice import AUTO, NoDtypeDeclared, choose_dtype

    dtype = config.getoption("--dtype")
    if dtype != AUTO:
        return dtype
    if DTYPE_CHOICE not in config.stash:
        try:
            config.stash[DTYPE_CHOICE] = (info.name, choose_dtype(info.name, info.capabilities))
        except NoDtypeDeclared as err:
            raise pytest.UsageError(str(err)) from None
    return config.stash[DTYPE_CHOICE][1].dtype


def pytest_terminal_summary(terminalreporter, config):
    if DTYPE_CHOICE in config.stash:
        name, choice = config.stash[DTYPE_CHOICE]
        terminalreporter.write_line(f"packcheck: engine {name}: dtype {choice.dtype} ({choice.why})")


POOL = pytest.StashKey()


def session_pool(config):
    """The session's warm engine processes (harness/launch/pool.py), made on first use: every arm runs in
    an engine's own processes, none in pytest's; closed when the session ends (pytest_unconfigure)."""
    if POOL not in config.stash:
        import tempfile
        from pathlib import Path

        from packcheck.harness.launch import LaunchPool

        config.stash[POOL] = LaunchPool(Path(tempfile.mkdtemp(prefix="packcheck-launches-")), float(config.getoption("--arm-timeout")))
    return config.stash[POOL]


def pytest_unconfigure(config):
    if POOL in config.stash:
        import shutil

        pool = config.stash[POOL]
        pool.close()
        shutil.rmtree(pool.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def packcheck_pool(pytestconfig):
    return session_pool(pytestconfig)


@pytest.fixture(scope="session")
def packcheck_inputs(pytestconfig):
    """The Inputs (model, seed, data scale) every case of the session is built from."""
    return run_inputs(pytestconfig)[0]


@pytest.fixture(scope="session")
def run_arm(packcheck_pool):
    """run_arm(engine_spec, case) -> StepResult: one case in the engine's own process, validated; a case the
    engine declines skips the test; any other outcome (invalid, crash, hang) fails it with its description."""
    from packcheck.harness.engines import validate_result

    def run(spec: str, case):
        outcome = packcheck_pool.run(spec, case)
        if outcome.status == "unsupported":
            pytest.skip(f"unsupported: the engine declines case {case.name!r}: {outcome.unsupported}")
        if outcome.status != "ok":
            pytest.fail(f"engine {spec!r} on case {case.name!r}: {outcome.describe()}", pytrace=False)
        return validate_result(spec, case, outcome.result)

    return run


@pytest.fixture(scope="session")
def verdict_of(packcheck_pool, packcheck_inputs):
    """verdict_of(engine_spec, scenario, family, dtype="float64", device="cpu", attention="auto"):
    run once per session and shared, because the conformance suite and packcheck's own mutant proof
    judge the same cells; every case built from the session's --model, --seed and --data-scale."""
    from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
    from packcheck.harness.scenarios import SCENARIOS

    options = RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool, inputs=packcheck_inputs)

    @functools.cache
    def run(engine: str, scenario: str, family: str, dtype: str, device: str, attention: str):
        return run_scenario(engine, SCENARIOS[scenario], family, dtype, device, attention=attention, options=options)

    def verdict(engine: str, scenario: str, family: str, dtype: str = "float64", device: str = "cpu", attention: str = "auto"):
        return run(engine, scenario, family, dtype, device, attention)  # one cache key whether defaults are spelled out or not

    return verdict


# `packcheck run` exits 2 when an engine supports none of the scenarios; the conformance suite must not go
# green for such an engine either (every cell skipped as unsupported would read as a clean run in CI).
_cell_outcomes: list[str] = []


def pytest_runtest_logreport(report):
    if CELL_MARKER in report.keywords and (report.when == "call" or (report.when == "setup" and report.skipped)):
        _cell_outcomes.append("xfailed" if hasattr(report, "wasxfail") else report.outcome)


def pytest_sessionfinish(session, exitstatus):
    if _cell_outcomes and all(outcome == "skipped" for outcome in _cell_outcomes) and exitstatus == 0:
        engine = session.config.getoption("--engine")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"packcheck: engine {engine!r} supports none of the {len(_cell_outcomes)} scenario cells: "
                                "nothing was tested (see the skip reasons above)", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
