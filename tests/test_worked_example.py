"""docs/adapters.md's worked example passes what it declares, and its one-line bug is caught."""

from __future__ import annotations

import pytest

SUPPORTED = ("packed_vs_unpacked", "document_isolation", "microbatch_invariance", "mask_alignment", "token_conservation")


@pytest.mark.parametrize("scenario", SUPPORTED)
def test_the_worked_example_passes(verdict_of, scenario):
    verdict = verdict_of("impls.example.minimal_engine:MinimalEngine", scenario, "llama")
    assert verdict.status == "pass", verdict.message()


def test_the_worked_example_declares_the_rest_unsupported(verdict_of):
    for scenario in ("golden_regression", "cp_vs_nocp", "rl_loss_aggregation"):
        assert verdict_of("impls.example.minimal_engine:MinimalEngine", scenario, "llama").status == "unsupported"


def test_a_mean_of_means_in_the_example_is_flagged(verdict_of):
    verdict = verdict_of("tests.engines.example_variants:MinimalEngineMeanOfMeans", "microbatch_invariance", "llama")
    assert verdict.status == "fail" and verdict.worst.margin > 1e3, verdict.message()
