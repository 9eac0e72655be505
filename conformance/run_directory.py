"""The pytest run's run directory (`--out DIR`), the one `packcheck run --out DIR` writes (harness/run_dir, its layout):
results.jsonl and results.json (every scenario cell's verdict, docs/results-schema.md; and the hypothesis property
tests' outcomes, which junit.xml counts as pytest does) with their flat tables,
report.html, summary.md (the Markdown for a pull request) and junit.xml (one test case per verdict), the saved arms of
failing verdicts (cases/), the engine's launches (launches/) and the lock that keeps a second run out; so one pytest
run is both the CI gate and the report.

A cell records its verdict on its test item (`record`); the verdict travels on the test's report, so under
pytest-xdist the workers' verdicts reach the controller, which alone writes the results and reports when the session
ends. The workers save a failing cell's arms as they judge it, each into the cell's own folder.
"""

from __future__ import annotations

import pytest

OUT_FLAG = "--out"
RECORD = pytest.StashKey()
ENGINE = pytest.StashKey()
LOCK = pytest.StashKey()


def add_option(group) -> None:
    group.addoption(OUT_FLAG, dest="packcheck_out", default=None, metavar="DIR",
                    help="write the run directory there, as `packcheck run --out DIR` does: results.json, report.html, "
                         "summary.md, junit.xml, the failing verdicts' arms (default: none)")


def run_dir_of(config):
    """The RunDir of --out (resolved: pytest-xdist's workers share the controller's working directory), or None."""
    from pathlib import Path

    from packcheck.harness.run_dir import RunDir

    out = config.getoption("packcheck_out")
    return None if out is None else RunDir(Path(out).resolve())


def claim(config) -> None:
    """On the controller (or the only process): create --out (with a .gitignore where it creates it) and hold its lock
    for the session, as `packcheck run` does (harness/run/out_lock.py); another run writing there is a usage error."""
    run_dir = run_dir_of(config)
    if run_dir is None or hasattr(config, "workerinput"):
        return
    from packcheck.harness.errors import InputError
    from packcheck.harness.run.out_lock import claim_out

    run_dir.create()
    try:
        config.stash[LOCK] = claim_out(run_dir)
    except InputError as err:
        raise pytest.UsageError(str(err)) from None


def record(item, verdict, engine=None) -> None:
    """Keep a cell's verdict for the run directory and the history store (its test report carries it:
    pytest_runtest_makereport), with the engine's identity where given (its EngineInfo: spec and releases)."""
    from packcheck.harness.run_dir.results import record_of

    item.stash[RECORD] = record_of(verdict)
    if engine is not None:
        from packcheck.harness.history.entry import engine_version

        item.stash[ENGINE] = {"spec": engine.spec, "version": engine_version(engine.releases)}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "call" and RECORD in item.stash:
        report.packcheck_record = item.stash[RECORD]  # a plain dict: pytest-xdist sends it to the controller
        if ENGINE in item.stash:
            report.packcheck_engine = item.stash[ENGINE]
    from packcheck.conformance.plugin import SCENARIO_MARKER

    marker = item.get_closest_marker(SCENARIO_MARKER)
    if marker is not None and (call.when == "call" or (call.when == "setup" and not report.passed)):
        report.packcheck_property = property_record(item, marker.args[0], report, call)  # plain too


def property_record(item, scenario: str, report, call) -> dict:
    """A hypothesis property test's outcome as results.json keeps it (docs/results-schema.md, "properties"): which
    property of which scenario, the cell it ran on, pytest's outcome and its message (the whole small report)."""
    from packcheck.harness.text import safe_text

    args = item.funcargs
    engine = args.get("engine")
    if hasattr(report, "wasxfail"):
        outcome, message = "xfailed", str(report.wasxfail)
    else:
        outcome = "error" if report.failed and call.when != "call" else report.outcome
        value = call.excinfo.value if call.excinfo is not None else None
        pytest_outcome = (pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception)
        message = "" if value is None else str(value) if isinstance(value, pytest_outcome) else call.excinfo.exconly()
    return {"test": item.name, "scenario": scenario, "engine": getattr(engine, "name", ""), "engine_spec": getattr(engine, "spec", ""),
            "family": str(args.get("family", "")), "dtype": str(args.get("dtype", "")), "device": str(args.get("device", "")),
            "outcome": outcome, "message": safe_text(message), "seconds": round(report.duration, 3)}


def pytest_runtest_logreport(report):
    record_ = getattr(report, "packcheck_record", None)
    if record_ is not None:
        collected.append(record_)
    engine = getattr(report, "packcheck_engine", None)
    if engine is not None:
        engines[engine["spec"]] = {"version": engine["version"]}
    property_ = getattr(report, "packcheck_property", None)
    if property_ is not None:
        properties.append(property_)


collected: list[dict] = []  # the verdicts the session's reports carried, in the order they were reported
properties: list[dict] = []  # the hypothesis property tests' outcomes (property_record), in the order they were reported
engines: dict[str, dict] = {}  # engine spec -> its identity ({"version"}), as the cells' reports carried it


def record_history(config, provenance_of) -> str | None:
    """The session's verdicts into the history store of --history or $PACKCHECK_HISTORY (harness/history/record.py), on the
    controller; the line for the terminal summary, or None when no store is asked for. Never fails the session."""
    from packcheck.harness.history.record import record as record_run, store_path

    path = store_path(config.getoption("packcheck_history"))
    if path is None or not collected:
        return None
    try:
        provenance = provenance_of(config)  # only now: it imports torch and asks git
        from packcheck.harness.run.engine_commit import engine_commit_depth, engine_commits

        commits = engine_commits(list(engines))
        depths = {spec: engine_commit_depth(spec) for spec in commits}
    except Exception as err:  # noqa: BLE001 - recording never fails a session
        return f"warning: not recorded in the history store {path}: {type(err).__name__}: {err}"
    identities = {spec: identity | ({"commit": commits[spec], "depth": depths[spec]} if spec in commits else {})
                  for spec, identity in engines.items()}
    data = {"provenance": provenance, "verdicts": [r["verdict"] for r in collected], "rows": [row for r in collected for row in r["rows"]]}
    run_dir = run_dir_of(config)
    return record_run(path, data, source="pytest", directory=str(run_dir.path) if run_dir is not None else "", engines=identities,
                      device=str(provenance.get("device", "cpu")))[1]


def write_run_directory(config, provenance: dict) -> str:
    """The results and reports of --out from the verdicts collected (on the controller, or the only process); what it
    holds, in a line for the terminal summary."""
    from packcheck.harness.report import write_run_reports
    from packcheck.harness.run_dir.results import ResultsFile

    run_dir = run_dir_of(config)
    results = ResultsFile(run_dir, provenance)
    for record_ in collected:
        results.add_record(record_)
    results.write(properties=properties)
    reports = write_run_reports(run_dir)
    return f"packcheck: {len(collected)} verdicts in {run_dir.path}: {', '.join([run_dir.results.name, *reports])}"
