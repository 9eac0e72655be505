"""poisoned_pads beyond the mutant proof (tests/test_mutants_are_caught.py): its canary fails an engine that takes the
request and ignores it, and each failing verdict names what reached the pads.

The diagnosis cells are the mutant proof's (the verdict_of cache and each mutant's xdist group, conftest.py)."""

from __future__ import annotations

import pytest

from packcheck.harness.compare.bands import BUG_FLOAT64


def test_an_engine_that_ignores_the_request_fails_at_the_canary_alone(verdict_of):
    verdict = verdict_of("tests.engines.pad_poison:IgnoresPadPoison", "poisoned_pads", "llama")
    assert verdict.status == "fail" and verdict.worst.margin >= BUG_FLOAT64, verdict.message()
    assert {c.item for c in verdict.comparisons if not c.passed} == {"canary"}, verdict.message()
    assert verdict.diagnosis.startswith("the canary's reported log-prob is not its row's while everything else agrees"), verdict.diagnosis


@pytest.mark.parametrize(("bug", "family", "phrase"), [
    ("pad-logits-mask-multiply", "llama", "whose pad positions hold NaN and +Inf on request (Case.pad_poison), returned non-finite "
                                          "values (result.loss is nan"),
    ("router-probs-over-padding", "qwen3_moe", "the MoE router's statistics depend on what the pad positions hold"),
    ("linear-attn-state-leak", "qwen3_5", "a real token's log-prob depends on what the pad positions hold"),
])
def test_poisoned_pads_names_what_reached_the_pads(verdict_of, bug, family, phrase):
    verdict = verdict_of(f"mutant.{bug}", "poisoned_pads", family)
    assert verdict.status == "fail" and phrase in verdict.diagnosis, verdict.message()
