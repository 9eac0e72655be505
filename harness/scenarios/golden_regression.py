"""golden_regression: the engine reproduces the reference trainer's stored float64 results.

One case per family (packed rows, an uneven two-micro-batch partition, an AdamW step) compared on
every quantity, including the parameters after the step. For the reference itself this pins its
numbers across versions; for any other engine it is a cross-engine check against the oracle that
needs no reference run.
"""

from __future__ import annotations

from packcheck.harness.compare import GOLDEN, Arms, Comparison, compare_results
from packcheck.harness.compare.rounding_bound import definition_at
from packcheck.harness.engines import Capabilities
from packcheck.harness.golden import GoldenProblem, load_golden
from packcheck.harness.judging.diagnoses import shared_diagnosis
from packcheck.harness.judging.document_drift import drift_by_document
from packcheck.harness.judging.golden_case import GOLDEN_ARM, golden_case
from packcheck.harness.judging.judgement import Judgement, Setting
from packcheck.harness.judging.truth import truth_tolerance
from packcheck.harness.scenarios.base import Scenario, from_setting
from packcheck.harness.scenarios.building import failing

ARM = GOLDEN_ARM


def build(setting: Setting) -> dict:
    return {ARM: golden_case(setting)}


def applies(setting: Setting, capabilities: Capabilities) -> str | None:
    """The goldens hold the tiny model at seed 0 with unscaled data; any other input has none to compare with."""
    if setting.model_name == "tiny" and setting.seed == 0 and setting.data_scale == 1:
        return None
    return (f"goldens are stored for the tiny model at seed 0 only (this run: --model {setting.model_name}, seed {setting.seed}, "
            f"data scale {setting.data_scale}); at other inputs the oracle is the reference run on the same case "
            "(gradient_oracle, and every scenario's arm comparisons)")


def judge(j: Judgement) -> list:
    case, result = j.cases[ARM], j.results[ARM]
    family = j.setting.family
    try:
        golden = load_golden(family, case)
        tolerance = truth_tolerance(family, case.dtype, j.tolerance)
    except GoldenProblem as problem:
        return [Comparison(arms=Arms(ARM, GOLDEN), quantity="golden", item=family, metric="available", observed=1.0, threshold=0.0,
                           where=str(problem))]
    return compare_results(Arms(ARM, GOLDEN), result, golden, tolerance, j.locate(ARM), optimizer=case.optimizer,
                           definition=definition_at(case, golden))


def diagnose(j: Judgement, failed: list) -> str:
    if any(c.quantity == "golden" for c in failed):
        return failed[0].where
    if shared := shared_diagnosis(j, failed):
        return shared
    if failing(failed, "logprobs"):
        first, later = drift_by_document(j.cases[ARM], j.results[ARM], load_golden(j.setting.family, j.cases[ARM]))
        if first <= j.tolerance.logprobs < later:
            return (f"the first document of every packed row matches the golden (error {first:.2g}) but later documents do not "
                    f"(error {later:.2g}): documents see their predecessors in the row (cross-document attention, positions not reset)")
        return (f"the forward differs from the golden in every document, the first of each row included (errors {first:.2g}, "
                f"{later:.2g}): the model math (RoPE, norms, attention, the loaded weights) differs in every arm, which the scenarios "
                "that compare arms of the engine with each other cannot see")
    if failing(failed, "params_after") and not (failing(failed, "grad") or failing(failed, "loss")):
        return "gradients agree with the golden but the parameters after AdamW do not: the optimizer step differs"
    return ("log-probs agree with the golden but the loss or gradients do not: the loss is normalised differently (this case "
            "has two micro-batches of uneven token counts: per-micro-batch normalisation?)")


GOLDEN_REGRESSION = Scenario(
    name="golden_regression",
    invariant="log-probs, loss, count, every gradient and the post-AdamW parameters equal the reference's stored float64 goldens",
    catches=("cross-doc-attention", "const-microbatch-scale", "ga-mean-of-means", "moe-router-counts-local", "rope-theta-default"),
    stages=(from_setting(build, golden=True),),
    judge=judge,
    diagnose=diagnose,
    applies=applies,
    absolute=True,
    disk_arms=1,
)
