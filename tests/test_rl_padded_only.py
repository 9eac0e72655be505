"""The RL scenarios judge an engine that never packs (TRL's GRPOTrainer) on its padded arms: the
reference restricted to them passes with the packed arms skipped and named, and a per-micro-batch
token mean restricted to them is still flagged."""

from __future__ import annotations

import pytest

SCENARIOS = ("rl_loss_aggregation", "rl_step0_ratio")


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_padded_only_reference_passes_on_its_padded_arms(verdict_of, scenario):
    verdict = verdict_of("tests.engines.padded_only:PaddedOnlyReference", scenario, "llama")
    assert verdict.status == "pass", verdict.message()
    assert verdict.skipped_arms and "does not support layout 'packed'" in verdict.detail
    assert any("unpacked" in c.arms.arm.name for c in verdict.comparisons)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_padded_only_mutant_is_flagged(verdict_of, scenario):
    verdict = verdict_of("tests.engines.padded_only:PaddedOnlyTokenMeanScope", scenario, "llama")
    assert verdict.status == "fail" and verdict.worst.margin >= 1e6, verdict.message()
