"""A check's verdict: the packed run held against the per-document oracle, quantity by quantity, with the tolerance of
harness/compare/same_precision.py (K x the per-document run's own distance from the higher-precision oracle, or the
dtype's rounding; float64 by the float64 table), and a diagnosis from which quantities fail.

Compared: the targets counted (exactly), the loss, every target's log-prob, every parameter's gradient (relative L2
per tensor, each against the gradient's scale where the oracle's is smaller: a parameter no target reaches).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from packcheck.guard.runs import StepNumbers
from packcheck.harness.compare import Comparison
from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.compare.comparison import Arms
from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.same_precision import K, compared, gradient_scales, relative
from packcheck.harness.text import safe_text

ARMS = Arms(ArmId("packed"), ArmId("per-document", role=Role.ORACLE))
FIELD = "guard_rel_l2"


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardVerdict:
    comparisons: tuple[Comparison, ...]
    documents: tuple[int, ...]  # the checked batch's document lengths
    dtype: str
    diagnosis: str = ""
    where: str = ""  # the first divergent module, in a sentence (a failing check localised)
    seconds: float = 0.0
    case_file: str = ""  # the shrunk case `packcheck replay` reruns
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was not checked, and why
    timings: dict[str, float] = field(default_factory=dict)  # seconds per part of the check (check.py)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    @property
    def worst(self) -> Comparison | None:
        return max(self.comparisons, key=lambda c: c.margin, default=None)

    def failing(self) -> list[Comparison]:
        return sorted((c for c in self.comparisons if not c.passed), key=lambda c: -c.margin)

    def message(self) -> str:
        head = (f"packcheck guard: {'PASS' if self.passed else 'FAIL'} on a batch of {len(self.documents)} documents "
                f"({sum(self.documents)} tokens, longest {max(self.documents, default=0)}), {self.dtype}")
        worst = self.worst
        if worst is not None:
            head += f", worst {worst.quantity}{' ' + worst.item if worst.item else ''}: error/tolerance {worst.margin:.3g}"
        lines = [head + f" ({self.seconds:.1f}s)"]
        if not self.passed:
            lines.append(f"  likely cause: {self.diagnosis}")
            if self.where:
                lines.append(f"  {self.where}")
            for c in self.failing()[:8]:
                term = c.bound.describe()
                lines.append(f"  - {c.quantity}{' ' + c.item if c.item else ''}: {c.metric} {c.observed:.3g} > allowed {c.threshold:.3g}"
                             + (f" ({term})" if term else ""))
            if self.case_file:
                lines.append(f"  replay: packcheck replay {self.case_file}")
        lines += [f"  note: {n}" for n in self.notes]
        return safe_text("\n".join(lines))

    def to_json(self) -> dict:
        return {"passed": self.passed, "documents": list(self.documents), "dtype": self.dtype, "diagnosis": self.diagnosis,
                "where": self.where, "seconds": round(self.seconds, 3), "case_file": self.case_file, "notes": list(self.notes), "timings": self.timings,
                "comparisons": [c.to_json() for c in self.comparisons]}


def comparisons(packed: StepNumbers, per_document: StepNumbers, oracle: StepNumbers, dtype: torch.dtype,
                normaliser: tuple[int, int, str] | None = None) -> tuple[Comparison, ...]:
    """`normaliser`: (the count the engine was given as num_items_in_batch, the count it must be, of what) where the
    guard can know the second (one micro-batch per step; the DP group's sum)."""
    found = [Comparison(arms=ARMS, quantity="num_loss_tokens", item="", metric="abs",
                        observed=float(abs(packed.counted - oracle.counted)), threshold=0.0,
                        where=f"the packed loss counts {packed.counted} targets; the documents have {oracle.counted}")]
    if normaliser is not None:
        given, right, of = normaliser
        found.append(Comparison(arms=ARMS, quantity="num_loss_tokens", item="num_items_in_batch", metric="abs",
                                observed=float(abs(given - right)), threshold=0.0,
                                where=f"the engine normalises by {given}; {of} have {right} targets"))
    loss = _compare("loss", "", packed.loss.reshape(1), per_document.loss.reshape(1), oracle.loss.reshape(1), dtype)
    # One scalar's own error is one draw of rounding, 0 by luck as often as not: the loss is allowed at least K x the
    # per-document run's error on the log-probs it averages (a vector: a stable measure of the same rounding).
    own = relative(per_document.logprobs.double().cpu(), oracle.logprobs.double().cpu()) if len(oracle.logprobs) else 0.0
    if K * own > loss.threshold and dtype != torch.float64:
        loss = dataclasses.replace(loss, threshold=K * own, bound=Bound(field=FIELD, source=Source.GOLDEN_FLOOR, floor=own,
                                   term=f"{K:g} x the per-document run's own error on the log-probs the loss averages, {own:.3g}"))
    found.append(loss)
    if packed.logprobs is not None and len(packed.logprobs) == len(oracle.logprobs):
        found.append(_compare("logprobs", "", packed.logprobs, per_document.logprobs, oracle.logprobs, dtype, where=_worst_token))
    scales = gradient_scales(oracle.grads)
    for name, truth in oracle.grads.items():
        got = packed.grads.get(name)
        got = torch.zeros_like(truth) if got is None else got
        found.append(_compare("grad", name, got, per_document.grads.get(name, torch.zeros_like(truth)), truth, dtype, scales[name]))
    return tuple(found)


def _compare(quantity: str, item: str, got: torch.Tensor, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype,
             scale: float = 0.0, where=None) -> Comparison:
    return compared(ARMS, quantity, got, reference, oracle, dtype, item=item, scale=scale, field=FIELD, reference_is="per-document run",
                    where=where(got, oracle) if where else "")


def _worst_token(got: torch.Tensor, oracle: torch.Tensor) -> str:
    i = int((got - oracle).abs().argmax())
    return f"target {i} of {len(got)} (document order): {got[i].item():.6g} against {oracle[i].item():.6g}"


def diagnosis(found: tuple[Comparison, ...]) -> str:
    failed = {c.quantity for c in found if not c.passed}
    if "num_loss_tokens" in failed:
        return ("the loss counts other targets than the documents have: a label left on a document's first token (a target "
                "across the boundary), a dropped token, or a normaliser of another batch")
    if "logprobs" in failed:
        return ("the packed forward differs from the documents run alone: tokens attend across documents, or positions do "
                "not restart at each document")
    if "loss" in failed and not any(c.quantity == "logprobs" for c in found):
        return ("the loss differs from the documents run alone; the step returned no logits (a fused head), so the forward "
                "was not compared token by token: where it parts is located below")
    if "loss" in failed:
        return "the log-probs agree but the loss does not: the tokens are weighted or normalised other than sum / N"
    if "grad" in failed:
        return "the forward and the loss agree with the documents run alone but the gradients do not: the backward is wrong"
    return ""
