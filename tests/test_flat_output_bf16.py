"""The false positive of issue 41, on the CPU: a seeded model at 0.6b or 8B predicts every token near -ln(V), where one
bfloat16 spacing of a log-prob is 0.0625 nats. An engine that computes its policy weights from unrounded log-probs and
reports the log-probs rounded (the reference's chunked log-probs, `reference.fast`, which the 8B preset runs) differs from
the definition evaluated at its reported log-probs by up to exp(0.0625 / 2) - 1 = 3.2% of a weight: above the calibrated
table's 1.37%, so the table alone fails a correct engine (rl_step0_ratio at 8B on an H200: 3.47). The `flat` size preset
puts a tiny model's log-probs in that binade. With the rounding-derived term (harness/compare/rounding_bound.py) the
engine passes; the same comparisons judged by the table alone (each row's bound.table, the threshold the table gave) fail
it; and a bug in the weights is still flagged, with its weights judged by the derived term."""

from __future__ import annotations

import functools

import pytest

from packcheck.harness.compare.bound import Source
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.scenarios import SCENARIOS

FLAT = Inputs(model="flat")
# reference.fast and mutant.rl-token-mean-scope on their single-process arms: the distributed ones add launches, not evidence
FAST = "tests.engines.single_process:SingleProcessFast"
TOKEN_MEAN_SCOPE = "tests.engines.single_process:SingleProcessTokenMeanScope"
# the brief of issue 41: a weight bug stays at least this many times over its bound in the flat bfloat16 setting
LOUD = 5.0


@pytest.fixture(scope="module")
def flat_bf16(packcheck_pool):
    """flat_bf16(engine, scenario): the verdict on llama's flat preset in bfloat16 on the CPU, once per module."""
    options = RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool, inputs=FLAT)

    @functools.cache
    def verdict(engine: str, scenario: str):
        return run_scenario(engine, SCENARIOS[scenario], "llama", "bfloat16", "cpu", save_passing=False, options=options)

    return verdict


def table_margin(c) -> float:
    """The margin the table alone gives a row (the rule before issue 41)."""
    return c.observed / c.bound.table if c.bound.source is Source.ROUNDING else c.margin


def test_the_fast_reference_fails_the_table_alone_and_passes_with_the_rounding_term(flat_bf16):
    verdict = flat_bf16(FAST, "rl_step0_ratio")
    assert verdict.status == "pass", verdict.message()
    failing_by_table = [c for c in verdict.comparisons if table_margin(c) > 1]
    assert failing_by_table, "the table alone passes the flat preset: it no longer reproduces the false positive"
    assert {(c.quantity, c.item) for c in failing_by_table} == {("dloss_dlogprobs", "policy token weight")}
    for c in failing_by_table:
        assert c.bound.term.startswith("bf16 spacing at |logp| = "), c.headline()
        magnitude = float(c.bound.term.split("= ")[1].split(":")[0])
        assert 8 <= magnitude < 16, f"the preset's log-probs left the binade of -ln(151,936): {c.bound.term}"


def test_a_weight_bug_is_still_flagged_loudly_by_the_rounding_term(flat_bf16):
    verdict = flat_bf16(TOKEN_MEAN_SCOPE, "rl_step0_ratio")
    assert verdict.status == "fail", verdict.message()
    weights = [c for c in verdict.comparisons if c.quantity == "dloss_dlogprobs" and not c.passed]
    assert weights and all(c.bound.source is Source.ROUNDING for c in weights), "the bug's weights are judged by the derived term"
    assert max(c.margin for c in weights) >= LOUD, max(weights, key=lambda c: c.margin).headline()
