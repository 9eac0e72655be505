"""Every scenario judges an engine without DP/CP on the arms it runs: optional distributed arms are
skipped and named, scenarios made only of distributed arms are unsupported, nothing crashes."""

from __future__ import annotations

import pytest

from packcheck.harness.scenarios import SCENARIOS

DISTRIBUTED_ONLY = {"cp_vs_nocp", "dp_cp_reduction", "ep_vs_noep", "vlm_collective_symmetry", "token_skew_collectives"}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_an_engine_without_dp_or_cp_is_judged_on_the_rest(verdict_of, scenario):
    verdict = verdict_of("tests.engines.single_process:SingleProcessReference", scenario, "llama")
    if scenario in DISTRIBUTED_ONLY:
        assert verdict.status == "unsupported", verdict.message()
        return
    assert verdict.status == "pass", verdict.message()
    with_distributed_arms = [arm for arm in SCENARIOS[scenario].optional_arms if "dp2" in arm or "cp2" in arm]
    for arm in with_distributed_arms:
        assert arm in verdict.skipped_arms and f"arm {arm!r} skipped:" in verdict.detail
