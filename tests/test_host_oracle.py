"""gradient_oracle and oracle_agreement need the float64 reference on the CPU at the run's --model: where its weights
and gradients cannot fit the host (8B: 193 GB against the H200 machine's 128 GiB) they are unsupported, with the
reason; at the sizes that fit they run as before."""

from __future__ import annotations

import pytest

from packcheck.harness.engines import resolve_engine
from packcheck.harness.judging import host_oracle
from packcheck.harness.models import model_spec
from packcheck.harness.scenarios import SCENARIOS, Setting

REFERENCE = resolve_engine("reference").capabilities
SETTING = Setting(family="llama", dtype="bfloat16", device="cuda", model=model_spec("llama"), model_name="tiny")


@pytest.mark.parametrize("scenario", ["gradient_oracle", "oracle_agreement"])
def test_the_float64_oracles_decline_a_model_the_host_cannot_hold(scenario, monkeypatch):
    assert SCENARIOS[scenario].applies(SETTING, REFERENCE) is None, "the tiny model's oracle fits any machine"
    monkeypatch.setattr(host_oracle, "host_bytes", lambda: 10**5)
    reason = SCENARIOS[scenario].applies(SETTING, REFERENCE)
    assert reason and "float64 reference on the CPU" in reason and "this machine has 0 GB" in reason, reason


def test_at_8b_the_oracle_needs_193_gb():
    params = 8_030_261_248
    assert round(host_oracle.COPIES * 8 * params / 1e9) == 193 > 128 * 2**30 / 1e9
