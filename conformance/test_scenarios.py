"""Every golden scenario x every family, against the engine under test (`--engine`).

A cell the engine pins as a known finding (harness/engines/findings.py) is a strict expected
failure: it must fail at least as badly as measured, and a pass there fails the test (the finding
is gone upstream; remove it).
"""

from __future__ import annotations

import pytest

from packcheck.harness.engines import finding_for
from packcheck.harness.run.verdict import UNSUPPORTED


@pytest.mark.packcheck_cell
def test_scenario(verdict_of, record_verdict, engine, scenario, family, dtype, device, attention):
    verdict = verdict_of(engine.spec, scenario.name, family, dtype, device, attention)
    record_verdict(verdict)
    if verdict.status == UNSUPPORTED:
        pytest.skip(f"unsupported: {verdict.detail}")
    finding = finding_for(engine.known_findings, scenario.name, family)
    if finding is None:
        assert verdict.status == "pass", verdict.message()
        return
    assert verdict.status != "pass", (
        f"unexpected pass: {finding.headline()} no longer reproduces; remove it from the known_findings of {engine.spec}"
    )
    assert verdict.known_finding, (
        f"{scenario.name} fails, but not as the known finding says (worst margin below {finding.min_margin:g}, or not a "
        f"numeric failure):\n{verdict.message()}"
    )
    pytest.xfail(verdict.known_finding)
