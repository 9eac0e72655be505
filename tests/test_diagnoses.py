"""Each shared diagnosis rule (harness/judging/diagnoses.py, docs/diagnoses.md) names the bug class
of the one-bug engine it applies to, through the real runner (llama, float64).

The cells are the mutant proof's where they can be (tests/test_mutants_are_caught.py): the verdict_of
cache and the per-mutant xdist group (conftest.py) run each of those once for both tests.
"""

from __future__ import annotations

import pytest

CELLS = [
    # rule, scenario, mutant's bug, the phrase its diagnosis must hold
    ("wrong_token_set", "microbatch_invariance", "boundary-label", "a document's first token is in the loss"),
    ("wrong_count (distributed)", "dp_cp_reduction", "dp-count-world-group",
     "all-reduced over more ranks than the data-parallel group"),
    ("wrong_count (single process)", "token_conservation", "pad-in-loss", "counted more loss tokens than the batch has"),
    ("wrong_token_weights", "microbatch_invariance", "ga-mean-of-means", "train on exactly the loss mask's tokens but weight them wrongly"),
    # the weights are read before any clipping: optimizer_step leads with them, not with clipping (issue 45, item 11)
    ("wrong_token_weights (optimizer_step)", "optimizer_step", "ga-mean-of-means", "train on exactly the loss mask's tokens but weight them wrongly"),
    ("clipping per micro-batch (optimizer_step)", "optimizer_step", "clip-per-microbatch", "clipped (or scaled) before accumulation"),
    ("replicas drift (optimizer_step)", "optimizer_step", "replica-last-microbatch-after-reduce", "replicas drift: after the step"),
    ("reported_logprobs", "packed_vs_unpacked", "logprobs-reported-shifted", "only the reported log-probs differ"),
    ("loss_disagrees_with_logprobs", "mask_alignment", "logprobs-reported-shifted",
     "yet the reported loss is not the mean of the reported log-probs"),
    ("reported_loss", "microbatch_invariance", "loss-reported-wrong", "only the reported loss differs"),
    ("baseline_against_golden", "vlm_collective_symmetry", "cross-doc-attention", "itself disagrees with the stored float64 golden"),
    ("golden_regression: the forward everywhere", "golden_regression", "rope-theta-default",
     "the forward differs from the golden in every document, the first of each row included"),
]
# the cells no mutant proof shares that cost most (cp 2 and 4 meshes; dp x cp meshes), in nox -s slow
SLOW_CELLS = [("baseline_odd_one_out", "cp_vs_nocp", "cross-doc-attention", "only the baseline 'single' differs"),
              ("reported_loss (distributed)", "dp_cp_reduction", "loss-reported-wrong", "only the reported loss differs")]
# what each of these once said instead (issues 15 and 16): the old line must not come back
WRONG_BEFORE = {
    ("microbatch_invariance", "boundary-label"): "mean of means",
    ("packed_vs_unpacked", "logprobs-reported-shifted"): "documents see their predecessors",
    ("cp_vs_nocp", "cross-doc-attention"): "change under context parallelism",
    ("dp_cp_reduction", "loss-reported-wrong"): "the gradient reduction",
    ("optimizer_step", "ga-mean-of-means"): "clipped (or scaled) before accumulation",
}


def cell_params():
    return ([pytest.param(scenario, bug, phrase, id=f"{rule}-{scenario}-{bug}") for rule, scenario, bug, phrase in CELLS]
            + [pytest.param(scenario, bug, phrase, id=f"{rule}-{scenario}-{bug}", marks=pytest.mark.slow)
               for rule, scenario, bug, phrase in SLOW_CELLS])


@pytest.mark.parametrize(("scenario_name", "bug", "phrase"), cell_params())
def test_diagnosis_names_the_bug_class(verdict_of, scenario_name, bug, phrase):
    verdict = verdict_of(f"mutant.{bug}", scenario_name, "llama")
    assert verdict.status == "fail", verdict.message()
    assert phrase in verdict.diagnosis, f"mutant.{bug} in {scenario_name}: expected {phrase!r} in the diagnosis:\n{verdict.diagnosis}"
    wrong = WRONG_BEFORE.get((scenario_name, bug))
    assert wrong is None or wrong not in verdict.diagnosis, verdict.diagnosis


def test_a_crashing_diagnosis_leaves_the_verdict_standing():
    from packcheck.harness.compare import Arms, Comparison, Pass, tolerance_for
    from packcheck.harness.run.conclusion import conclude_pass
    from packcheck.harness.run.execution import Execution
    from packcheck.harness.run.judge import judge
    from packcheck.harness.run.scenario_runner import setting_for
    from packcheck.harness.scenarios import Judgement, Scenario
    from packcheck.harness.scenarios.base import from_setting

    def broken_diagnosis(j, failed):
        raise KeyError("an arm the rule expected")

    failing = Comparison(arms=Arms("a", "b"), quantity="loss", item="", metric="rel", observed=1.0, threshold=0.0)
    scenario = Scenario(name="s", invariant="", catches=(), stages=(from_setting(dict),), judge=lambda j: [failing], diagnose=broken_diagnosis)
    setting = setting_for("llama", "float64", "cpu")
    judged = judge(scenario, Judgement(setting=setting, cases={}, results={}, tolerance=tolerance_for("float64")))
    verdict = conclude_pass(scenario, Execution(pass_=Pass.MAIN, setting=setting, cases={}, outcomes=()), judged)
    assert verdict.status == "fail" and verdict.comparisons == (failing,)
    assert "diagnosis of this failure crashed" in verdict.diagnosis and "KeyError" in "".join(map(str, verdict.notes))
