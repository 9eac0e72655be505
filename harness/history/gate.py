"""`packcheck history --fail-on-step`: which detected steps fail a pull request.

A cell regresses when the last step of its series is upward (its margin rose by at least a factor 2: the smallest step
harness/history/steps.py reports) and the level it rose to is at or above `level` (FAIL_LEVEL by default: within a
factor 2 of the tolerance line, or over it). The last step is the one into the series' newest level, so a step that
was later undone does not count, and a step far below the line (1e-6 to 1e-5 of the tolerance in float64) is shown on
the page but does not fail. A cell whose newest verdict reproduces a known finding is left out: that finding's own
strict expected failure gates it (conformance/test_scenarios.py).
"""

from __future__ import annotations

from packcheck.harness.history.series import KNOWN, Series
from packcheck.harness.history.steps import Step

FAIL_LEVEL = 0.5


def regressions(found: list[Series], level: float = FAIL_LEVEL) -> list[tuple[Series, Step]]:
    """The cells of `found` whose last step is a regression to `level` or above, with that step."""
    failing = []
    for series in found:
        if series.fit is None or not series.fit.steps or series.groups[-1].status == KNOWN:
            continue
        last = series.fit.steps[-1]
        if last.up and last.after >= level:
            failing.append((series, last))
    return failing
