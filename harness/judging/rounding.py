"""Evidence for the diagnoses (harness/judging/diagnoses.py): whether an arm run at float64 differs
from float64 truth the way float32 rounding inside the engine makes it differ. The truth is the
stored float64 golden (golden_regression's arm) or the float64 reference's oracle arm on the same
rows (gradient_oracle's arms).

An engine built on transformers loads a float64 model and still computes RMSNorm, the RoPE angles
and (in its causal-LM loss) the log-softmax in float32. Against float64 truth such a run is off
by float32 rounding everywhere: every quantity by more than float64's tolerance (1e-10), none by more
than the reference trainer's own float32 run is (its measured noise floor x NOISE_FACTOR, the
tolerance golden_regression uses for a float32 run), and not in a few places but in nearly every
gradient tensor and in the first document of each packed row as much as in later ones. A logic bug
is either larger (a wrong weight, token or position moves a quantity by 1e-4 and more, docs/margins.md)
or concentrated (a few tensors, later documents only, an integer count): `RoundingPattern.holds`
requires all three signs, and the figures it keeps are what the diagnosis prints.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from packcheck.harness.compare import (
    GOLDEN,
    TOLERANCES,
    Arms,
    Comparison,
    compare_logprobs,
    compare_results,
    compare_tensors,
)
from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.compare.arms import compare_dloss_dlogprobs
from packcheck.harness.golden import GoldenProblem, load_golden
from packcheck.harness.judging.document_drift import drift_by_document
from packcheck.harness.judging.judgement import Judgement
from packcheck.harness.judging.truth import truth_tolerance

# the share of gradient tensors that must be off beyond float64 rounding for the error to count as spread
SPREAD = 0.9
LOWER = "float32"  # the internal precision the pattern names


@dataclass(frozen=True, slots=True)
class RoundingPattern:
    """An arm's float64 result against the golden, read for float32 rounding inside the engine."""

    arm: ArmId
    worst_of_float32: float  # the largest error / float32 allowance over every comparison: <= 1 is within float32 rounding
    worst_row: str  # that comparison, in words
    grads_off: int  # gradient tensors off by more than the float64 bound their comparisons failed by
    grads: int
    grad_errors: tuple[float, float, float]  # per-tensor rel_l2: lowest, median, highest
    first_documents: float  # worst log-prob error over the first document of each packed row, nats
    later_documents: float  # the same over the documents after it
    float64_logprobs: float  # the float64 log-prob bound the arm failed by (inf: its log-probs were within it), for the spread test

    @property
    def holds(self) -> bool:
        within = self.worst_of_float32 <= 1.0
        spread = self.grads > 0 and self.grads_off >= SPREAD * self.grads
        in_every_document = self.first_documents > self.float64_logprobs  # not only after a boundary
        return within and spread and in_every_document

    def figures(self) -> str:
        low, median, high = self.grad_errors
        return (f"gradients rel_l2 {low:.1e} to {high:.1e} (median {median:.1e}), {self.grads_off} of {self.grads} tensors off; "
                f"log-probs {self.first_documents:.1e} nats in the first document of each row, {self.later_documents:.1e} in later "
                f"ones; the largest is {self.worst_of_float32:.2g} of what the reference trainer itself errs in float32 ({self.worst_row})")


def float32_allowance(family: str):
    """What a float32 run of the reference may differ from the golden: golden_regression's float32 tolerance."""
    return truth_tolerance(family, LOWER, TOLERANCES[LOWER])


def is_float64_truth(against: ArmId | str) -> bool:
    """Whether an arm judged against `against` is judged against float64 truth (the golden, an oracle arm)."""
    return against == GOLDEN or (isinstance(against, ArmId) and against.role is Role.ORACLE)


def rounding_pattern(j: Judgement, arm: ArmId, failed: list[Comparison]) -> RoundingPattern | None:
    """`arm`, run at float64, against its float64 truth (its oracle arm, else the golden of the family's golden
    case), read for float32 rounding; None where it does not apply (another dtype, no truth, no float32 noise floor).
    `failed`: the arm's failing comparisons against that truth, whose bounds say what float64 allows: a quantity none
    of them judged was within float64's bound everywhere, so no threshold (inf) counts any of it as off."""
    case, result = j.case(arm), j.result(arm)
    if case.dtype != "float64":
        return None
    try:
        allowance = float32_allowance(j.setting.family)
        if j.ran(arm.oracle):  # compared as gradient_oracle compares
            truth, pair = j.result(arm.oracle), Arms(arm, arm.oracle)
            rows = [compare_logprobs(pair, result, truth, allowance, j.locate(arm)),
                    *compare_dloss_dlogprobs(pair, result, truth, allowance, j.locate(arm)),
                    *compare_tensors(pair, "grad", result.grads, truth.grads, allowance)]
        else:
            truth, pair = load_golden(j.setting.family, case), Arms(arm, GOLDEN)
            rows = compare_results(pair, result, truth, allowance, j.locate(arm), optimizer=case.optimizer)
    except GoldenProblem:
        return None
    worst = max(rows, key=lambda c: c.margin)
    float64 = {c.bound.field: c.threshold for c in failed if c.arms.arm == arm}
    grad_bound, logprobs_bound = float64.get("grad", math.inf), float64.get("logprobs", math.inf)
    grad_rel = [c.observed for c in rows if c.quantity == "grad" and c.metric == "rel_l2"]
    first, later = drift_by_document(case, result, truth)
    return RoundingPattern(
        arm=arm, worst_of_float32=worst.margin, worst_row=_in_words(worst),
        grads_off=sum(e > grad_bound for e in grad_rel), grads=len(grad_rel),
        grad_errors=(min(grad_rel), statistics.median(grad_rel), max(grad_rel)) if grad_rel else (0.0, 0.0, 0.0),
        first_documents=first, later_documents=later, float64_logprobs=logprobs_bound)


def _in_words(c: Comparison) -> str:
    item = f" {c.item}" if c.item else ""
    return f"{c.quantity}{item} {c.metric} {c.observed:.2g}"
