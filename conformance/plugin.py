"""The packcheck pytest plugin, registered through the `pytest11` entry point: installed with
packcheck, it is active in any repository.

    pip install /path/to/packcheck      # a checkout, a git URL or a wheel: packcheck is not on PyPI (docs/adapters.md)
    pytest --pyargs packcheck.conformance --engine mypkg.adapter:MyEngine [--family llama] [--scenario S ...]
        [--dtype auto|float64|float32|bfloat16] [--model 0.6b] [--seed 1] [--data-scale 85] [--noise-floors calibration.json]
        [--out DIR] [--history PATH]

`--dtype auto`, the default, runs the engine at the most precise dtype it declares; `--out DIR` writes the run
directory `packcheck run --out DIR` writes (conformance/run_directory.py); `--history PATH` (or $PACKCHECK_HISTORY) appends
the session's verdicts to a history store (docs/history.md).

The options are `packcheck run`'s, from one table (harness/run/options.py), checked by the same code
(harness/run/choices.py); they live in one "packcheck" group, each help text states its default, and
the report header shows what runs. The plugin imports nothing heavy until a packcheck option is
given (it is checked before anything runs) or a test asks for `verdict_of`, `run_arm` or
`packcheck_pool` (every arm runs in the engine's own processes, never in pytest's), and it changes
nothing global: its hypothesis profiles are registered under packcheck's own names and used only
by packcheck's property tests (conformance/known_findings.py).
"""

from __future__ import annotations

import functools
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, settings

from packcheck.conformance import one_line, run_directory
from packcheck.harness.run.options import PLUGIN_SPELLING, add_to_group, plugin_options, plugin_values

# the scenario cells of the conformance suite carry this marker: a run where every one is skipped tested nothing
CELL_MARKER = "packcheck_cell"
# a hypothesis property test of one scenario carries this one, with the scenario's name
SCENARIO_MARKER = "packcheck_scenario"

PROFILES = {
    # derandomized: the same command draws the same examples, which is how a failure is reproduced (an installed test
    # cannot take @reproduce_failure, so no blob is printed)
    "ci": dict(derandomize=True, max_examples=12, deadline=None, print_blob=False, suppress_health_check=[HealthCheck.too_slow]),
    "dev": dict(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
}
for _name, _values in PROFILES.items():
    settings.register_profile(f"packcheck-{_name}", **_values)


def hypothesis_profile() -> str:
    """packcheck's property tests run under packcheck-<PACKCHECK_HYPOTHESIS_PROFILE> (default: ci, derandomized)."""
    return f"packcheck-{os.environ.get('PACKCHECK_HYPOTHESIS_PROFILE', 'ci')}"


def pytest_addoption(parser):
    group = parser.getgroup("packcheck", "packcheck conformance suite")
    add_to_group(group)
    run_directory.add_option(group)


def given(config) -> dict:
    """The packcheck options given, keyed and shaped as `packcheck run` takes them (harness/run/options.py)."""
    return plugin_values(config.getoption)


def pytest_configure(config):
    config.addinivalue_line("markers", f"{CELL_MARKER}: a scenario x family cell of the packcheck conformance suite")
    config.addinivalue_line("markers", f"{SCENARIO_MARKER}(name): a property test of one scenario, deselected when --scenario leaves it out")
    config.addinivalue_line("markers", "slow: a long property test, left out of packcheck's own default CI run (nox -s slow runs it)")
    run_directory.collected.clear()
    run_directory.properties.clear()
    run_directory.engines.clear()
    _cell_outcomes.clear()
    _skip_reasons.clear()
    config.pluginmanager.register(run_directory, "packcheck-run-directory")
    config.pluginmanager.register(one_line, "packcheck-one-line")
    if any(config.getoption(option.flag) != option.default for option in plugin_options()):
        run_choices(config)  # what no run can take is a usage error before anything runs
    run_directory.claim(config)


def pytest_report_header(config):
    values = given(config)
    families = values["family"] or "all supported"
    extra = {"scenarios": ",".join(values["scenario"] or ()), "data-scale": values["data_scale"], "noise-floors": values["noise_floors"]}
    return (f"packcheck: engine={values['engine'][0]} families={families} dtype={values['dtype']} device={values['device']} "
            f"attention={values['attention']} model={values['model']} seed={values['seed']}"
            + "".join(f" {name}={value}" for name, value in extra.items() if value) + f" hypothesis-profile={hypothesis_profile()}")


CHOICES = pytest.StashKey()
RUN_DIRECTORY_LINE = pytest.StashKey()  # what the session wrote under --out, said in the terminal summary
HISTORY_LINE = pytest.StashKey()  # what the session recorded in the history store (or the warning why not)
DTYPE_CHOICE = pytest.StashKey()


def run_choices(config):
    """The packcheck options checked as `packcheck run` checks them (harness/run/choices.py), once per session: the
    Inputs, the families the model fits (None: every family the engine supports), the scenarios, the noise floors."""
    if CHOICES not in config.stash:
        from packcheck.harness.errors import InputError
        from packcheck.harness.run.choices import checked

        try:
            choices = checked(given(config), timeout_flag=PLUGIN_SPELLING["timeout"]["flag"])
        except (InputError, LookupError) as err:
            raise pytest.UsageError(err.args[0] if isinstance(err, KeyError) and err.args else str(err)) from None
        if len(choices.engines) != 1:
            raise pytest.UsageError(f"--engine {config.getoption('--engine')}: matches {', '.join(choices.engines)}; the conformance "
                                    "suite tests one engine: name one")
        config.stash[CHOICES] = choices
    return config.stash[CHOICES]


def chosen_dtype(config, info) -> str:
    """--dtype, or with --dtype auto the most precise dtype the engine declares (harness/run/dtype_choice.py), kept
    for the terminal summary; an engine that declares none is a usage error naming the field."""
    from packcheck.harness.run.dtype_choice import AUTO, NoDtypeDeclared, choose_dtype

    dtype = run_choices(config).dtype
    if dtype != AUTO:
        return dtype
    if DTYPE_CHOICE not in config.stash:
        try:
            config.stash[DTYPE_CHOICE] = (info.name, choose_dtype(info.name, info.capabilities))
        except NoDtypeDeclared as err:
            raise pytest.UsageError(str(err)) from None
    return config.stash[DTYPE_CHOICE][1].dtype


def pytest_terminal_summary(terminalreporter, config):
    if RUN_DIRECTORY_LINE in config.stash:
        terminalreporter.write_line(config.stash[RUN_DIRECTORY_LINE])
    if config.stash.get(HISTORY_LINE, None):
        terminalreporter.write_line(f"packcheck: {config.stash[HISTORY_LINE]}")
    if DTYPE_CHOICE in config.stash:
        name, choice = config.stash[DTYPE_CHOICE]
        terminalreporter.write_line(f"packcheck: engine {name}: dtype {choice.dtype} ({choice.why})")


POOL = pytest.StashKey()


def session_pool(config):
    """The session's warm engine processes (harness/launch/pool.py), made on first use: every arm runs in
    an engine's own processes, none in pytest's; closed when the session ends (pytest_unconfigure). Their folders are
    the run directory's launches/ with --out (kept, as `packcheck run` keeps them), else a temporary folder."""
    if POOL not in config.stash:
        import tempfile
        from pathlib import Path

        from packcheck.harness.launch import LaunchPool

        run_dir = run_directory.run_dir_of(config)
        workdir = run_dir.launches if run_dir is not None else Path(tempfile.mkdtemp(prefix="packcheck-launches-"))
        config.stash[POOL] = LaunchPool(workdir, run_choices(config).timeout)
    return config.stash[POOL]


def pytest_unconfigure(config):
    if POOL in config.stash:
        import shutil

        pool = config.stash[POOL]
        pool.close()
        if run_directory.run_dir_of(config) is None:
            shutil.rmtree(pool.workdir, ignore_errors=True)
    if run_directory.LOCK in config.stash and config.stash[run_directory.LOCK] is not None:
        config.stash[run_directory.LOCK].close()


@pytest.fixture(scope="session")
def packcheck_pool(pytestconfig):
    return session_pool(pytestconfig)


@pytest.fixture(scope="session")
def packcheck_inputs(pytestconfig):
    """The Inputs (model, seed, data scale) every case of the session is built from."""
    return run_choices(pytestconfig).inputs


@pytest.fixture(scope="session")
def packcheck_floors(pytestconfig):
    """dtype -> field -> noise floor from --noise-floors ({}: the shipped floors), as `packcheck run` judges with them."""
    return run_choices(pytestconfig).noise_floors


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
def verdict_of(pytestconfig, packcheck_pool, packcheck_inputs, packcheck_floors):
    """verdict_of(engine_spec, scenario, family, dtype="float64", device="cpu", attention="auto"):
    run once per session and shared, because the conformance suite and packcheck's own mutant proof
    judge the same cells; every case built from the session's --model, --seed and --data-scale, and
    judged with its --noise-floors."""
    from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
    from packcheck.harness.run.spot_checks import SpotChecks
    from packcheck.harness.scenarios import SCENARIOS

    # oracle_agreement also judges arms drawn from the cells judged before it in this process (harness/run/spot_checks.py;
    # conformance/conftest.py runs its cells last)
    spot = SpotChecks(packcheck_pool, size=run_choices(pytestconfig).spot_arms, noise_floors=packcheck_floors)
    options = RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool, inputs=packcheck_inputs, noise_floors=packcheck_floors,
                         run_dir=run_directory.run_dir_of(pytestconfig), spot=spot)  # with --out, a failing verdict's arms are saved there

    @functools.cache
    def run(engine: str, scenario: str, family: str, dtype: str, device: str, attention: str):
        return run_scenario(engine, SCENARIOS[scenario], family, dtype, device, attention=attention, save_passing=False, options=options)

    def verdict(engine: str, scenario: str, family: str, dtype: str = "float64", device: str = "cpu", attention: str = "auto"):
        return run(engine, scenario, family, dtype, device, attention)  # one cache key whether defaults are spelled out or not

    return verdict


# `packcheck run` exits 2 when an engine supports none of the scenarios; the conformance suite must not go
# green for such an engine either (every cell skipped as unsupported would read as a clean run in CI).
_cell_outcomes: list[str] = []
_skip_reasons: list[str] = []


def pytest_runtest_logreport(report):
    if CELL_MARKER in report.keywords and (report.when == "call" or (report.when == "setup" and report.skipped)):
        _cell_outcomes.append("xfailed" if hasattr(report, "wasxfail") else report.outcome)
        _absolute_cells.extend(cell for name, cell in report.user_properties if name == ABSOLUTE_CELL)
        if report.skipped and isinstance(report.longrepr, tuple):  # (path, line, "Skipped: reason")
            _skip_reasons.append(str(report.longrepr[2]).removeprefix("Skipped: "))


def run_provenance(config) -> dict:
    """What the run directory's results.json records of the session: versions, device, the pytest command, the choices."""
    from packcheck.harness.provenance import provenance

    choices = run_choices(config)
    chosen = config.stash.get(DTYPE_CHOICE, None)
    return (provenance(choices.device, ["pytest", *config.invocation_params.args]) | choices.provenance()
            | ({"dtype_choice": {choices.engines[0]: f"{chosen[1].dtype} ({chosen[1].why})"}} if chosen else {}))


@pytest.fixture
def record_verdict(request):
    """record_verdict(verdict, engine=None): the cell's verdict into the run directory of --out and the history store of
    --history (conformance/run_directory.py), with the engine's identity where given (its EngineInfo)."""
    return functools.partial(run_directory.record, request.node)


# the same for an absolute check (harness/run/absolute.py): (engine, family, scenario, status) of every cell judged,
# carried by the test report (user_properties reach the controller under xdist, as the outcomes do)
ABSOLUTE_CELL = "packcheck_cell_status"
_absolute_cells: list[tuple[str, str, str, str]] = []


def record_cell(node, engine: str, family: str, scenario: str, status: str) -> None:
    """A conformance cell's verdict (Status.XFAIL: a known finding reproduced as pinned), for the session's absolute-check rule."""
    from packcheck.harness.judging.status import Status

    node.user_properties.append((ABSOLUTE_CELL, (engine, family, scenario, Status(status).value)))  # plain text: xdist sends it


def absolute_check(session) -> None:
    """A session that judged an absolute scenario and had none pass for an engine and family is not green, unless
    --relative-only; the terminal summary says which."""
    from packcheck.harness.run.absolute import absolute_summary, unanchored

    relative_only = session.config.getoption("--relative-only")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and (said := absolute_summary(_absolute_cells, relative_only)):
        reporter.write_line(f"packcheck: {said}", red=not relative_only)
    if unanchored(_absolute_cells) and not relative_only and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_sessionfinish(session, exitstatus):
    if not hasattr(session.config, "workerinput") and session.config.getoption("packcheck_out") and run_directory.collected:
        session.config.stash[RUN_DIRECTORY_LINE] = run_directory.write_run_directory(session.config, run_provenance(session.config))
    if not hasattr(session.config, "workerinput"):
        absolute_check(session)
        session.config.stash[HISTORY_LINE] = run_directory.record_history(session.config, run_provenance)
    if _cell_outcomes and all(outcome == "skipped" for outcome in _cell_outcomes) and exitstatus == 0:
        engine = session.config.getoption("--engine")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            common = Counter(_skip_reasons).most_common(1)
            why = f"; the most common reason ({common[0][1]} of {len(_cell_outcomes)}): {common[0][0]}" if common else ""
            reporter.write_line(f"packcheck: engine {engine!r} supports none of the {len(_cell_outcomes)} scenario cells: "
                                f"nothing was tested{why}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
