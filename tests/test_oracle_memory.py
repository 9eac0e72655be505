"""gradient_oracle and oracle_agreement need the float64 reference at the run's --model on the case's device: where its
weights and gradients cannot fit (8B: 193 GB against an H200's 150.8 and its machine's 137) they are unsupported, with
the reason; at the sizes that fit they run as before."""

from __future__ import annotations

import pytest

from packcheck.harness.engines import resolve_engine
from packcheck.harness.judging import oracle_memory
from packcheck.harness.models import model_spec
from packcheck.harness.scenarios import SCENARIOS, Setting

REFERENCE = resolve_engine("reference").capabilities
SETTING = Setting(family="llama", dtype="bfloat16", device="cpu", model=model_spec("llama"), model_name="tiny")


@pytest.mark.parametrize("scenario", ["gradient_oracle", "oracle_agreement"])
def test_the_float64_oracles_decline_a_model_their_device_cannot_hold(scenario, monkeypatch):
    assert SCENARIOS[scenario].applies(SETTING, REFERENCE) is None, "the tiny model's oracle fits any machine"
    monkeypatch.setattr(oracle_memory, "host_bytes", lambda: 10**5)
    reason = SCENARIOS[scenario].applies(SETTING, REFERENCE)
    assert reason and "float64 reference on the case's device" in reason and "the host has 0 GB" in reason, reason


def test_at_8b_the_oracle_needs_more_than_an_h200_or_its_host():
    need = oracle_memory.COPIES * 8 * 8_030_261_248
    assert need > 143771 * 2**20 and need > 128 * 2**30
