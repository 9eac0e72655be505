"""The error rounding alone allows a float32 or bfloat16 comparison, derived from the values compared (issue 41).

An engine computes in its dtype and reports values rounded to it. Where the harness evaluates a definition at the
engine's reported log-probs, or compares two arms whose weights follow from their own log-probs, the two sides differ by
what that rounding moves the quantity by, and that grows with the values: a bf16 log-prob near -ln(151,936) = -11.9 is
rounded on a grid of 0.0625 nats, one near -ln(128) = -4.85 on a grid of 0.031. The calibrated table
(harness/compare/tolerances.py) was measured at one size; this term follows the values, and a comparison's threshold is
max(table, derived) (`at_least`): never looser than the larger of the two, never tighter than the table.

    spacing(x) = 2^floor(log2 |x|) * eps(dtype)     the gap from x to its neighbour away from 0

A reported log-prob lies within half a spacing of the value the engine computed its loss with (round to nearest); the
bound allows ULPS = 1 spacing: the other half is headroom, so that the worst of a large run's millions of tokens does
not sit on the bound, and it covers an engine whose loss and report take the log-prob through different kernels of its
dtype. A reported loss is a value rounded once: half its spacing. A reported weight is what autograd carried back through
the engine's loss (the count's reciprocal, a scale for the accumulation steps, a cast, each rounding once): WEIGHT_ULPS
= 2 spacings (measured: transformers 5.24's Trainer reports the float32 weight of a 65-token mean 1.02 spacings from
-1/65, where the reference rounds it once). Every term of a policy token's weight is
c exp(+-logp) (harness/losses/policy.py, `slope`), so a log-prob moved by d moves the weight by at most
slope (exp(|d|) - 1), and the loss, whose derivative is the weight, by at most |d| (|w| + slope (exp(|d|) - 1)):

    a token's weight against the definition:   slope (exp(d) - 1) + 2 spacing(w),   d = spacing(logp)
    against another arm's, at its log-probs:   slope (exp(d) - 1) + both 2 spacing(w),
                                               d = |logp_a - logp_b| + spacing(logp_a) + spacing(logp_b)
    the ratio exp(logp - old), both reported:  exp(spacing(logp) + spacing(old)) - 1
    a loss, sum over tokens:                   sum_t d_t (|w_t| + slope_t (exp(d_t) - 1)) + spacing(loss) / 2 per reported loss

A max_rel threshold is the largest token's bound over the scale the error is divided by (not a per-token test), a
rel_nats threshold the loss's bound over max(|loss|, 1). A token whose log-prob crosses a clip boundary within d is not
covered (its weight jumps to 0); the scenarios keep every ratio 0.15 nats or more from one. float64 is not derived
(`rounding_of` gives None): its table (1e-10) is the measured spread across CPUs, and a float64 run is judged exactly as
before. Derivation and measurements: docs/margins.md, "Tolerances that follow from the numbers".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.losses import Expected, expected_loss

ULPS = 1.0  # spacings between a reported log-prob and the one the engine computed with (the module docstring)
WEIGHT_ULPS = 2.0  # spacings between a reported weight and its exact value (the module docstring)
SHORT = {torch.float32: "fp32", torch.bfloat16: "bf16"}


@dataclass(frozen=True, slots=True)
class Rounding:
    """The grid of one dtype that rounds (float32, bfloat16)."""

    dtype: torch.dtype

    @property
    def name(self) -> str:
        return SHORT[self.dtype]

    def spacing(self, x: torch.Tensor | float) -> torch.Tensor:
        """2^floor(log2|x|) * eps, in float64; 0 at x = 0."""
        magnitude = torch.as_tensor(x, dtype=torch.float64).abs()
        return torch.exp2(torch.floor(torch.log2(magnitude))) * torch.finfo(self.dtype).eps

    def gap(self, *logprobs: torch.Tensor) -> torch.Tensor:
        """How far the log-probs an engine computed with may lie from these reported ones, summed over the sides."""
        return sum(ULPS * self.spacing(lp) for lp in logprobs)


def rounding_of(dtype: str) -> Rounding | None:
    """The dtype's grid where it rounds; None for float64, whose comparisons keep the table."""
    return {"float32": Rounding(torch.float32), "bfloat16": Rounding(torch.bfloat16)}.get(dtype)


@dataclass(frozen=True, slots=True)
class Derived:
    threshold: float  # in the comparison's metric
    term: str  # in words, for the bound, the failing line and the report
    source: Source = Source.ROUNDING  # ROUNDING, or NULL (harness/compare/null_bound.py)
    floor: float | None = None  # NULL: the null measured


def at_least(allowed: dict, derived: Derived | None) -> dict:
    """Tolerance.by's {threshold, bound}, replaced by the derived term where that is larger: max(table, derived)."""
    if derived is None or not derived.threshold > allowed["threshold"]:
        return allowed
    table = allowed["bound"]
    return {"threshold": derived.threshold,
            "bound": Bound(field=table.field, source=derived.source, floor=derived.floor, term=derived.term, table=allowed["threshold"])}


def ratio_term(rounding: Rounding | None, logprobs: Sequence[torch.Tensor], olds: Sequence[torch.Tensor]) -> Derived | None:
    """exp(logp - old) - 1 where both are reported log-probs (token 0 of each sample left out, as the comparison does)."""
    if rounding is None:
        return None
    gaps = [rounding.gap(lp.double()[1:], old[1:]) for lp, old in zip(logprobs, olds)]
    i, t = _argmax(gaps)
    if i < 0:
        return None
    gap = float(gaps[i][t])
    return Derived(math.expm1(gap), f"{rounding.name} spacing at |logp| = {abs(float(logprobs[i][t + 1])):.3g} (new and old): "
                                    f"{100 * math.expm1(gap):.3g}%")


@dataclass(frozen=True, slots=True)
class Definition:
    """A loss's definition evaluated at one arm's reported log-probs, in a dtype that rounds them."""

    rounding: Rounding
    logprobs: Sequence[torch.Tensor]  # the arm's reported log-probs
    expected: Expected  # the definition there: loss, weights, and how fast each weight moves (weight_slopes)

    def weights_term(self, reported: Sequence[Sequence[torch.Tensor]], scale: float, apart: Sequence[torch.Tensor] | None = None) -> Derived | None:
        """max over tokens of a weight's bound / `scale`: against the definition (`apart` None), or against another arm
        whose reported log-probs are `apart` (that arm's and this one's weights both in `reported`)."""
        if not scale:
            return None
        bounds, gaps = [], []
        for i in range(len(self.logprobs)):
            gap = self._gap(i, apart)
            own = sum(WEIGHT_ULPS * self.rounding.spacing(weights[i]) for weights in reported)
            bounds.append(self._slopes(i) * torch.expm1(gap) + own)
            gaps.append(gap)
        i, t = _argmax(bounds)
        if i < 0:
            return None
        spacing = f"{self.rounding.name} spacing at |logp| = {abs(float(self.logprobs[i][t])):.3g}"
        moved = "" if apart is None else f"log-probs {abs(float(self.logprobs[i][t] - apart[i][t])):.3g} nats apart + "
        return Derived(float(bounds[i][t]) / scale, f"{moved}{spacing}: {100 * math.expm1(float(gaps[i][t])):.3g}%")

    def loss_term(self, reported: Sequence[float], against: float, apart: Sequence[torch.Tensor] | None = None) -> Derived:
        """A loss's bound in rel_nats (over max(|against|, 1)): against the definition, or another arm's (`apart`)."""
        total, tokens, largest = 0.0, 0, 0.0
        for i, lp in enumerate(self.logprobs):
            weights = self.expected.dloss_dlogprobs[i]
            gap = self._gap(i, apart)
            counted = (weights != 0) | (self._slopes(i) != 0)
            gap = torch.where(counted, gap, 0.0)
            total += float((gap * (weights.abs() + self._slopes(i) * torch.expm1(gap))).sum())
            tokens += int(counted.sum())
            largest = max(largest, float(lp.double().abs()[counted].max())) if counted.any() else largest
        total += sum(float(self.rounding.spacing(loss)) / 2 for loss in reported)
        moved = "" if apart is None else "the arms' log-prob differences + "
        return Derived(total / max(abs(against), 1.0),
                       f"{moved}{self.rounding.name} spacing of {tokens} log-probs (|logp| up to {largest:.3g}) through their weights: "
                       f"{total:.3g} nats")

    def _gap(self, i: int, apart: Sequence[torch.Tensor] | None) -> torch.Tensor:
        """How far sample i's log-probs the weights were computed from may lie apart: from the reported ones (against the
        definition), or between this arm's and the other's (their difference and both roundings)."""
        lp = self.logprobs[i]
        if apart is None:
            return self.rounding.gap(lp)
        return (lp.double() - apart[i].double()).abs() + self.rounding.gap(lp, apart[i])

    def _slopes(self, i: int) -> torch.Tensor:
        slopes = self.expected.weight_slopes
        return torch.zeros_like(self.expected.dloss_dlogprobs[i]) if slopes is None else slopes[i]


def definition_at(case: Case, result: StepResult, expected: Expected | None = None) -> Definition | None:
    """`case`'s loss at `result`'s reported log-probs, where the case's dtype rounds (else None: the table alone)."""
    rounding = rounding_of(case.dtype)
    if rounding is None:
        return None
    return Definition(rounding, result.logprobs, expected if expected is not None else expected_loss(case, result.logprobs))


def between_arms(case: Case, result: StepResult) -> Definition | None:
    """The definition an arm-vs-arm comparison against `result` propagates rounding through: a policy loss's, whose
    weights move with the log-probs; None for SFT (weights -1/N whatever the log-probs: the table bounds them)."""
    return definition_at(case, result) if case.loss.is_policy else None


def _argmax(per_sample: Sequence[torch.Tensor]) -> tuple[int, int]:
    """(sample, token) of the largest value over every sample; (-1, -1) when there is none."""
    best, where = -math.inf, (-1, -1)
    for i, values in enumerate(per_sample):
        if values.numel() and float(values.max()) > best:
            best, where = float(values.max()), (i, int(values.argmax()))
    return where
