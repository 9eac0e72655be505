"""Under `--tb=line` a failing packcheck test is one line wherever pytest prints it.

A scenario cell's or a property's failure message is a small report whose first line is the whole story (scenario,
cell, likely cause, the command that reproduces it: conformance/test_scenarios.py, property_failure.py). `--tb=line`
prints that first line in the failures section, but the short test summary prints the whole message where pytest
believes it runs on CI (the `CI` or `BUILD_NUMBER` environment variable: 15 lines a failure). So under `--tb=line`
the report's crash message is cut to its first line, for packcheck's own tests only: any other test of the session
keeps what pytest prints.
"""

from __future__ import annotations

import pytest


def is_packcheck_test(item) -> bool:
    """A scenario cell or a property test of one scenario (their markers: conformance/plugin.py)."""
    from packcheck.conformance.plugin import CELL_MARKER, SCENARIO_MARKER

    return any(item.get_closest_marker(name) is not None for name in (CELL_MARKER, SCENARIO_MARKER))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    crash = getattr(report.longrepr, "reprcrash", None)
    if report.failed and crash is not None and item.config.option.tbstyle == "line" and is_packcheck_test(item):
        crash.message = crash.message.split("\n", 1)[0]
