"""docs/extending.md's scenario recipe, followed: a new scenario is one module (here, this file's first half)
built from the public pieces (a plan of one stage, the arm builders, the comparisons, the shared diagnosis),
and the runner judges it like any registered scenario: the reference passes it and a mutant with the bug it
claims fails it. Registering it for `packcheck run` is one more line in harness/scenarios/__init__.py."""

from __future__ import annotations

from packcheck.harness.compare import compare_count, compare_loss_with_logprobs
from packcheck.harness.contract import UNPACKED, packed
from packcheck.harness.data.samples import MIXED_DOCUMENTS
from packcheck.harness.judging.cases import arm, samples_for
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.run.scenario_runner import RunOptions, run_scenario
from packcheck.harness.scenarios.base import Scenario, from_setting

# ---- the example scenario, as harness/scenarios/loss_is_its_logprobs.py would hold it ----


def build(setting: Setting) -> dict:
    samples = samples_for(setting, MIXED_DOCUMENTS)
    return {"packed": arm(setting, "packed", samples, packed(48)), "unpacked": arm(setting, "unpacked", samples, UNPACKED)}


def judge(j: Judgement) -> list:
    """Each arm's loss is the mean of its own log-probs over the loss mask, and its count is the mask's."""
    return [row for name in j.results for row in (compare_count(j.cases[name], j.results[name], name),
                                                   compare_loss_with_logprobs(j.cases[name], j.results[name], j.tolerance, name))]


def diagnose(j: Judgement, failed: list) -> str:
    return shared_diagnosis(j, failed) or "the reported loss is not the token mean of the reported log-probs over the loss mask"


LOSS_IS_ITS_LOGPROBS = Scenario(
    name="loss_is_its_logprobs",
    invariant="the reported loss is -mean(log-probs over the loss mask) and the count is the mask's, packed and unpacked",
    catches=("pad-in-loss",),
    stages=(from_setting(build),),
    judge=judge,
    diagnose=diagnose,
)

# ---- the recipe's checks ----


def test_the_reference_passes_the_example_and_the_mutant_with_its_bug_fails_it(packcheck_pool):
    options = RunOptions(timeout=packcheck_pool.timeout, pool=packcheck_pool)
    clean = run_scenario("reference", LOSS_IS_ITS_LOGPROBS, "llama", options=options)
    assert clean.status == "pass" and len(clean.comparisons) == 4, clean.message()
    for bug in LOSS_IS_ITS_LOGPROBS.catches:
        flagged = run_scenario(f"mutant.{bug}", LOSS_IS_ITS_LOGPROBS, "llama", options=options)
        assert flagged.status == "fail" and flagged.diagnosis, flagged.message()
        assert {c.quantity for c in flagged.comparisons if not c.passed} >= {"num_loss_tokens"}, flagged.message()
