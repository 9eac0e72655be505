"""Every golden scenario x every family, against the engine under test (`--engine`)."""

from __future__ import annotations

import pytest

from harness.run.scenario_runner import run_scenario
from harness.run.verdict import UNSUPPORTED


def test_scenario(engine, scenario, family, dtype, device, attention):
    verdict = run_scenario(engine, scenario, family, dtype, device, attention=attention)
    if verdict.status == UNSUPPORTED:
        pytest.skip(f"unsupported: {verdict.detail}")
    assert verdict.status == "pass", verdict.message()
