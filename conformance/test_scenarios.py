"""Every golden scenario x every family, against the engine under test (`--engine`)."""

from __future__ import annotations

import pytest

from harness.run.verdict import UNSUPPORTED


def test_scenario(pytestconfig, verdict_of, scenario, family, dtype, device, attention):
    verdict = verdict_of(pytestconfig.getoption("--engine"), scenario.name, family, dtype, device, attention)
    if verdict.status == UNSUPPORTED:
        pytest.skip(f"unsupported: {verdict.detail}")
    assert verdict.status == "pass", verdict.message()
