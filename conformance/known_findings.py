"""How a hypothesis property of the conformance suite holds a pinned known finding (harness/engines/findings.py).

Without a finding the property must hold. With one, a failing example (the first one: shrinking
would only cost engine runs) is the expected failure; a property that holds passes, because a
property test covers one layout of the scenario (the `use_cache` leak of hf_trainer cannot show
in unpacked rows) and the scenario's own cell in test_scenarios.py is where the finding is strict.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import Phase, settings

from packcheck.conformance.plugin import hypothesis_profile
from packcheck.harness.engines import KnownFinding


def property_settings(finding: KnownFinding | None) -> settings:
    """packcheck's hypothesis profile (packcheck.conformance.plugin), and with a finding: stop at the first failing example."""
    base = settings.get_profile(hypothesis_profile())
    if finding is None:
        return settings(base)
    return settings(base, phases=[Phase.explicit, Phase.reuse, Phase.generate], report_multiple_bugs=False)


def check_property(check: Callable[[], None], finding: KnownFinding | None) -> None:
    """Run the property: a failing example is the expected failure of a finding, else the test's failure, reported as
    its message (conformance/property_failure.py) and hypothesis's falsifying example, with no traceback."""
    try:
        check()
        return
    except AssertionError as err:
        failed = err
    if finding is not None:
        pytest.xfail(finding.headline())
    example = [note for note in getattr(failed, "__notes__", ()) if note.startswith(("Falsifying example", "Failing test case"))]
    pytest.fail("\n".join([str(failed), *example]), pytrace=False)
