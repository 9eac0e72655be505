"""hf_trainer.moe: transformers' Trainer on qwen3_moe keeps packed and padded rows of a micro-batch
equal (aux loss and router counts included), and sums per-micro-batch aux losses (the pinned finding)."""

from __future__ import annotations

import pytest


def test_packed_and_padded_rows_give_the_same_router_reports(verdict_of):
    verdict = verdict_of("hf_trainer.moe", "packed_vs_unpacked", "qwen3_moe", dtype="float32")
    assert verdict.status == "pass", verdict.message()
    quantities = {c.quantity for c in verdict.comparisons}
    assert {"aux_loss", "router_tokens_per_expert"} <= quantities, "both arms report the router quantities: they are compared"


@pytest.mark.parametrize("scenario", ["microbatch_invariance", "golden_regression"])
def test_per_micro_batch_aux_loss_is_the_pinned_finding(verdict_of, scenario):
    verdict = verdict_of("hf_trainer.moe", scenario, "qwen3_moe", dtype="float32")
    assert verdict.failed and verdict.known_finding, verdict.message()
    assert verdict.worst.quantity == "aux_loss", verdict.worst.headline()
    assert not [c for c in verdict.comparisons if c.quantity == "router_tokens_per_expert" and not c.passed], "routing itself agrees"
