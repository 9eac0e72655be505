"""Every golden scenario x every family, against the engine under test (`--engine`).

A cell the engine pins as a known finding (harness/engines/findings.py) is a strict expected
failure: it must fail at least as badly as measured, and a pass there fails the test (the finding
is gone upstream; remove it).
"""

from __future__ import annotations

import pytest

from packcheck.conformance.plugin import record_cell
from packcheck.harness.engines import finding_for
from packcheck.harness.judging.status import Status


@pytest.mark.packcheck_cell
def test_scenario(request, verdict_of, record_verdict, engine, scenario, family, dtype, device, attention):
    verdict = verdict_of(engine.spec, scenario.name, family, dtype, device, attention)
    record_verdict(verdict, engine)
    finding = finding_for(engine.known_findings, scenario.name, family)
    record_cell(request.node, engine.spec, family, scenario.name,
                Status.XFAIL if finding is not None and verdict.known_finding else verdict.status)
    if verdict.status is Status.UNSUPPORTED:
        pytest.skip(f"unsupported: {verdict.detail}")
    # pytest.fail without a traceback: the message is the report, its first line the whole story under --tb=line
    if finding is None:
        if verdict.status is not Status.PASS:
            pytest.fail(failure_text(verdict), pytrace=False)
        return
    if verdict.status is Status.PASS:
        pytest.fail(f"unexpected pass: {finding.headline()} no longer reproduces; remove it from the known_findings of {engine.spec}",
                    pytrace=False)
    if not verdict.known_finding:
        pytest.fail(f"{scenario.name} fails, but not as the known finding says (worst margin below {finding.min_margin:g}, or not a "
                    f"numeric failure): {failure_text(verdict)}", pytrace=False)
    pytest.xfail(verdict.known_finding)


FIRST_LINE_CAUSE = 200  # characters of the likely cause on the first line


def failure_text(verdict) -> str:
    """The verdict's message, its first line extended with the likely cause and the reproduce command."""
    head, _, rest = verdict.message().partition("\n")
    cause = verdict.diagnosis if len(verdict.diagnosis) <= FIRST_LINE_CAUSE else verdict.diagnosis[:FIRST_LINE_CAUSE - 3] + "..."
    return f"{head}: {cause or 'see below'} | reproduce: {verdict.reproduce}\n{rest}"
