"""How a hypothesis property of the conformance suite holds a pinned known finding (harness/engines/findings.py).

Without a finding the property must hold. With one it is a strict expected failure: hypothesis
must find a failing example (the first one: shrinking would only cost engine runs), else the test
fails as an unexpected pass.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import Phase, settings

from harness.engines import KnownFinding


def property_settings(finding: KnownFinding | None) -> settings:
    if finding is None:
        return settings()
    return settings(phases=[Phase.explicit, Phase.reuse, Phase.generate], report_multiple_bugs=False)


def check_property(check: Callable[[], None], finding: KnownFinding | None) -> None:
    if finding is None:
        check()
        return
    with pytest.raises(AssertionError):
        check()
    pytest.xfail(finding.headline())
