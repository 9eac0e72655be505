"""Per-token errors between the arms a verdict compared, read back from the arms the run saved.

A verdict's rows name what was compared: `packed vs unpacked` (two arms of one engine, token by
token) or `packed_left: engine vs harness` (one arm against the loss weights the harness expects).
For each such comparison this recomputes, for every token, the error of the quantity that failed:
the log-prob (nats) when log-probs differ, else the loss weight d loss / d logprob relative to
-1/N (gradient-only bugs leave log-probs exact and show up there). A sample that differs between
the two arms (document_isolation replaces some on purpose) is not compared.

Log-prob errors are laid out in the rows of whichever arm packs the most documents per row (the
fewest rows): a leak across documents shows only where documents share a row. Loss-weight errors
are laid out in the observed arm's rows, whose micro-batches are what the comparison varies.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from harness.contract import Case, StepResult
from harness.data.packing import layout_rows
from harness.report.saved_arms import SavedArms

PAIR = re.compile(r"^(?P<observed>[\w.-]+) vs (?P<reference>[\w.-]+)")
HARNESS = re.compile(r"^(?P<observed>[\w.-]+): engine vs harness$")
PER_TOKEN = ("logprobs", "dloss_dlogprobs", "supervised_set")
MAX_STRIPS = 3  # per verdict: the worst failing per-token comparisons


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenErrors:
    arms: str
    quantity: str  # logprobs | dloss_dlogprobs
    case: Case  # the arm whose layout places the tokens in rows
    errors: list[list[float] | None]  # [sample][token]; None: the sample is not compared
    threshold: float
    failed: bool

    @property
    def what(self) -> str:
        if self.quantity == "logprobs":
            return "log-prob error |observed - reference| (nats)"
        if HARNESS.match(self.arms):
            return "loss-weight error |d loss/d logprob - expected| x N (expected: -1/N on the loss mask, 0 elsewhere)"
        return "loss-weight error |d loss/d logprob - reference| x N (relative to the weight -1/N of one token)"


@dataclass(frozen=True, slots=True)
class _Choice:
    arms: str
    quantity: str
    threshold: float
    failed: bool
    margin: float


def _choose(rows: pd.DataFrame) -> list[_Choice]:
    """One quantity per compared pair: the log-probs if they failed, else the loss weights if they
    failed, else (pair within tolerance) the log-probs. Failing pairs first, worst first."""
    choices = []
    for arms, group in rows[rows["quantity"].isin(PER_TOKEN)].groupby("arms", sort=False):
        if not (PAIR.match(arms) or HARNESS.match(arms)):
            continue  # e.g. "engine vs golden": the golden is not a saved arm
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
        choices.append(_Choice(arms, quantity, float(by_quantity[quantity]["threshold"].iloc[0]), is_failed, margin))
    choices.sort(key=lambda c: (not c.failed, -c.margin))
    failing = [c for c in choices if c.failed]
    return failing[:MAX_STRIPS] if failing else choices[:1]


def _difference(a: list, b: list, case_a: Case, case_b: Case, scale: float) -> list[list[float] | None]:
    errors = []
    for i, (x, y) in enumerate(zip(a, b)):
        same = i < len(case_b.samples) and case_a.samples[i].input_ids == case_b.samples[i].input_ids
        errors.append(((x.double() - y.double()).abs() / scale).tolist() if same else None)
    return errors


def _pair_errors(quantity: str, observed: tuple[Case, StepResult], reference: tuple[Case, StepResult]) -> list | None:
    (case_a, a), (case_b, b) = observed, reference
    if quantity == "logprobs":
        return _difference(a.logprobs, b.logprobs, case_a, case_b, 1.0)
    if a.dloss_dlogprobs is None or b.dloss_dlogprobs is None:
        return None
    scale = max((t.double().abs().max().item() for t in b.dloss_dlogprobs if t.numel()), default=0.0) or 1.0
    return _difference(a.dloss_dlogprobs, b.dloss_dlogprobs, case_a, case_b, scale)


def _harness_errors(case: Case, result: StepResult) -> list | None:
    """|weight - expected| x N, expected = -1/N on the harness's supervised set and 0 elsewhere."""
    if result.dloss_dlogprobs is None:
        return None
    n = case.num_loss_tokens
    supervised = case.supervised
    return [[abs(float(w) + (1.0 / n if (i, t) in supervised else 0.0)) * n for t, w in enumerate(weights)]
            for i, weights in enumerate(result.dloss_dlogprobs)]


def token_errors(saved: SavedArms, rows: pd.DataFrame) -> list[TokenErrors]:
    """The per-token errors of a verdict's worst per-token comparisons (at most MAX_STRIPS)."""
    found = []
    for choice in _choose(rows):
        pair = PAIR.match(choice.arms)
        observed = saved.get((pair or HARNESS.match(choice.arms))["observed"])
        if observed is None:
            continue
        layout = observed[0]
        if pair:
            reference = saved.get(pair["reference"])
            errors = None if reference is None else _pair_errors(choice.quantity, observed, reference)
            if reference is not None and choice.quantity == "logprobs":
                layout = min((observed[0], reference[0]), key=lambda case: len(list(layout_rows(case))))
        else:
            errors = _harness_errors(*observed)
        if errors is not None:
            found.append(TokenErrors(arms=choice.arms, quantity=choice.quantity, case=layout, errors=errors,
                                     threshold=choice.threshold, failed=choice.failed))
    return found
