"""What a failing hypothesis property of the conformance suite says: like a scenario cell's failure, a first line
with the scenario, the cell and the likely cause (one line under `--tb=line`), the failing comparisons, and the
commands that reproduce it: the scenario's own fixed arms through `packcheck run`, and this very example through
pytest (packcheck's hypothesis profile is derandomized, so the same command draws the same examples; an installed
test cannot take `@reproduce_failure`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence

from packcheck.harness.compare import Comparison
from packcheck.harness.run.reproduce import reproduce_command
from packcheck.harness.scenarios import SCENARIOS

SHOWN = 5


class PropertyFailed(AssertionError):
    """A failing example of a property: its message is the small report (property_report)."""


def property_report(*, scenario: str, engine_spec: str, family: str, dtype: str, device: str, example: str, test: str,
                    failed: Sequence[Comparison], diagnose: Callable[[], str] | None = None) -> str:
    """The report of a failing example; `diagnose` gives the scenario's diagnosis of it, where the scenario can say."""
    cause = ""
    if diagnose is not None:
        try:
            cause = diagnose()
        except Exception:  # noqa: BLE001 - a diagnosis that cannot be made leaves the scenario's description
            cause = ""
    if not cause:
        cause = f"{SCENARIOS[scenario].invariant} does not hold (it catches {', '.join(SCENARIOS[scenario].catches)})"
    head = f"{scenario} property [{engine_spec} / {family} / {dtype} / {device}]: FAIL for {example}: likely cause: {cause}"
    rows = [f"  - {c.headline()}" for c in failed[:SHOWN]]
    more = [f"  ... and {len(failed) - SHOWN} more failing comparisons"] if len(failed) > SHOWN else []
    scenario_run = reproduce_command(engine_spec, f"--family {family} --scenario {scenario} --dtype {dtype} --device {device}")
    this_example = (f"{shlex.quote(sys.executable)} -m pytest --pyargs packcheck.conformance --engine {shlex.quote(engine_spec)} "
                    f"--family {family} --dtype {dtype} --device {device} -k {shlex.quote(test)}")
    return "\n".join([f"{head} | reproduce: {this_example}", *rows, *more, f"  the scenario's own arms: {scenario_run}",
                      f"  this example again: {this_example}",
                      f"  what {scenario} checks: packcheck explain {scenario}"])
