"""The pytest run's run directory (`--out DIR`), as `packcheck run --out DIR` writes it: results.jsonl and
results.json (every scenario cell's verdict, docs/results-schema.md), report.html, summary.md (the Markdown for a
pull request) and junit.xml (one test case per verdict), so one pytest run is both the CI gate and the report.

A cell records its verdict on its test item (`record`); the verdict travels on the test's report, so under
pytest-xdist the workers' verdicts reach the controller, which alone writes the directory when the session ends.
"""

from __future__ import annotations

import pytest

OUT_FLAG = "--out"
RECORD = pytest.StashKey()
RECORDS = pytest.StashKey()


def add_option(group) -> None:
    group.addoption(OUT_FLAG, dest="packcheck_out", default=None, metavar="DIR",
                    help="write the run directory there, as `packcheck run --out DIR` does: results.json, report.html, "
                         "summary.md, junit.xml (default: none)")


def record(item, verdict) -> None:
    """Keep a cell's verdict for the run directory (its test report carries it: pytest_runtest_makereport)."""
    from packcheck.harness.run.results import record_of

    item.stash[RECORD] = record_of(verdict)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call" and RECORD in item.stash:
        outcome.get_result().packcheck_record = item.stash[RECORD]  # a plain dict: pytest-xdist sends it to the controller


def pytest_runtest_logreport(report):
    record_ = getattr(report, "packcheck_record", None)
    if record_ is not None:
        collected.append(record_)


collected: list[dict] = []  # the verdicts the session's reports carried, in the order they were reported


def write_run_directory(config, provenance: dict) -> str:
    """The run directory of --out from the verdicts collected (on the controller, or the only process); what it holds,
    in a line for the terminal summary."""
    from pathlib import Path

    from packcheck.harness.files import write_atomically
    from packcheck.harness.report import render_markdown, write_html, write_junit
    from packcheck.harness.run.results import ResultsFile

    directory = Path(config.getoption("packcheck_out")).resolve()
    results = ResultsFile(directory, provenance)
    for record_ in collected:
        results.add_record(record_)
    results.write()
    write_html(directory, directory / "report.html")
    write_atomically(directory / "summary.md", render_markdown(directory))
    write_junit(directory, directory / "junit.xml")
    return f"packcheck: {len(collected)} verdicts in {directory}: results.json, report.html, summary.md, junit.xml"
