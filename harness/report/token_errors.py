"""Per-token errors between what a verdict compared, read back from the arms the run saved.

A verdict's rows say, as data, which arm was judged (`arm`) and against what (`against`): another
arm of the same engine, token by token, or HARNESS, the loss's own definition evaluated at the
arm's log-probs (harness/losses/expected.py: -1/N on the loss mask for SFT, each aggregation
mode's weights for a policy loss). For each such comparison this recomputes, for every token, the
error of the quantity that failed: the log-prob (nats) when log-probs differ, else the loss
weight d loss / d logprob relative to the largest expected weight (gradient-only bugs leave
log-probs exact and show up there). A sample that differs between the two arms
(document_isolation replaces some on purpose) is not compared.

Log-prob errors are laid out in the rows of whichever arm packs the most documents per row (the
fewest rows): a leak across documents shows only where documents share a row. Loss-weight errors
are laid out in the judged arm's rows, whose micro-batches are what the comparison varies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from packcheck.harness.compare import HARNESS, NOT_ARMS
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.contract.rows import layout_rows
from packcheck.harness.losses import expected_loss
from packcheck.harness.run_dir.saved_arms import SavedArms

PER_TOKEN = ("logprobs", "dloss_dlogprobs", "supervised_set")
MAX_STRIPS = 3  # per verdict: the worst failing per-token comparisons


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenErrors:
    arms: str  # "arm vs against", for people
    against: str  # the row's `against`: another saved arm's name, or HARNESS
    quantity: str  # logprobs | dloss_dlogprobs
    case: Case  # the arm whose layout places the tokens in rows
    errors: list[list[float] | None]  # [sample][token]; None: the sample is not compared
    threshold: float
    failed: bool
    expectation: str = ""  # what the weights were compared with, when that is the loss's definition

    @property
    def what(self) -> str:
        if self.quantity == "logprobs":
            return "log-prob error |observed - reference| (nats)"
        if self.against == HARNESS:
            return f"loss-weight error |d loss/d logprob - expected| / max |expected| (expected: {self.expectation})"
        return "loss-weight error |d loss/d logprob - reference| / max |reference|"


@dataclass(frozen=True, slots=True)
class _Choice:
    arm: str  # the rows' `arm` and `against`: the names the run saved the arms under (or HARNESS)
    against: str
    quantity: str
    threshold: float
    failed: bool
    margin: float


def _choose(rows: pd.DataFrame) -> list[_Choice]:
    """One quantity per compared pair: the log-probs if they failed, else the loss weights if they
    failed, else (pair within tolerance) the log-probs. Failing pairs first, worst first."""
    choices = []
    per_token = rows[rows["quantity"].isin(PER_TOKEN) & (rows["arm"] != "")]
    for (arm, against), group in per_token.groupby(["arm", "against"], sort=False):
        if against in NOT_ARMS and against != HARNESS:
            continue  # e.g. the golden: not a saved arm
        by_quantity = dict(tuple(group.groupby("quantity")))
        failed = {q: not bool(g["passed"].all()) for q, g in by_quantity.items()}
        weights_failed = failed.get("dloss_dlogprobs", False) or failed.get("supervised_set", False)
        if failed.get("logprobs") or ("logprobs" in failed and not weights_failed):
            quantity, is_failed = "logprobs", failed["logprobs"]
        elif "dloss_dlogprobs" in failed:
            quantity, is_failed = "dloss_dlogprobs", weights_failed
        else:
            continue
        margin = max(math.inf if math.isnan(m) else m for m in group["margin"])
        choices.append(_Choice(arm, against, quantity, float(by_quantity[quantity]["threshold"].iloc[0]), is_failed, margin))
    choices.sort(key=lambda c: (not c.failed, -c.margin))
    failing = [c for c in choices if c.failed]
    return failing[:MAX_STRIPS] if failing else choices[:1]


def _difference(a: list, b: list, case_a: Case, case_b: Case, scale: float) -> list[list[float] | None]:
    errors = []
    for i, (x, y) in enumerate(zip(a, b)):
        same = i < len(case_b.samples) and case_a.samples[i].input_ids == case_b.samples[i].input_ids
        errors.append(((x.double() - y.double()).abs() / scale).tolist() if same else None)
    return errors


def _scale(weights: list) -> float:
    return max((t.double().abs().max().item() for t in weights if t.numel()), default=0.0) or 1.0


def _pair_errors(quantity: str, observed: tuple[Case, StepResult], reference: tuple[Case, StepResult]) -> list | None:
    (case_a, a), (case_b, b) = observed, reference
    if quantity == "logprobs":
        return _difference(a.logprobs, b.logprobs, case_a, case_b, 1.0)
    if a.dloss_dlogprobs is None or b.dloss_dlogprobs is None:
        return None
    return _difference(a.dloss_dlogprobs, b.dloss_dlogprobs, case_a, case_b, _scale(b.dloss_dlogprobs))


def token_errors(saved: SavedArms, rows: pd.DataFrame) -> list[TokenErrors]:
    """The per-token errors of a verdict's worst per-token comparisons (at most MAX_STRIPS)."""
    found = []
    for choice in _choose(rows):
        observed = saved.get(choice.arm)
        if observed is None:
            continue
        layout, expectation, errors = observed[0], "", None
        if choice.against not in NOT_ARMS:
            reference = saved.get(choice.against)
            errors = None if reference is None else _pair_errors(choice.quantity, observed, reference)
            if reference is not None and choice.quantity == "logprobs":
                layout = min((observed[0], reference[0]), key=lambda case: len(list(layout_rows(case))))
        elif observed[1].dloss_dlogprobs is not None:
            case, result = observed
            expected = expected_loss(case, result.logprobs)
            errors = _difference(result.dloss_dlogprobs, expected.dloss_dlogprobs, case, case, _scale(expected.dloss_dlogprobs))
            expectation = expected.describe(case)
        if errors is not None:
            found.append(TokenErrors(arms=f"{choice.arm} vs {choice.against}", against=choice.against, quantity=choice.quantity, case=layout, errors=errors,
                                     threshold=choice.threshold, failed=choice.failed, expectation=expectation))
    return found
