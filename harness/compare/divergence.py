"""Where two arms first part: their activations (harness/contract/activations.py) compared point by point, on the
tokens both computed (or, where a scenario changes some samples on purpose, on the samples its arms must
agree on), in forward order and then in backward order. Pure: activations in, a Divergence out.

A point's error is the relative L2 distance of the two arms' values over the shared tokens, ||a - b|| / ||b||
(estimated from their projections: equal values give 0 exactly), judged by the dtype's bound for a tensor's
relative L2 error, the gradient's (`Tolerance.grad`: 1e-10 in float64, the calibrated floor's multiple below).
Where the forward first exceeds it is the first divergent module; a forward that agrees everywhere while the
backward parts at the very first point it reaches (the model's output) means the loss differs, not a module; a
backward that parts later names the first module in backward order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from packcheck.harness.compare.bound import Bound
from packcheck.harness.contract.activations import Activations, Point


class Where(str, Enum):
    FORWARD = "forward"  # a module's forward: the first divergent module
    BACKWARD = "backward"  # the forward agrees; a module's backward parts first
    LOSS = "loss"  # the forward agrees; the gradient into the model's output already differs: the loss does
    NOWHERE = "nowhere"  # every captured value and gradient agrees
    UNAVAILABLE = "unavailable"  # not located: `reason` says why


@dataclass(frozen=True, slots=True)
class PointError:
    label: str  # the point ("model.layers.0.self_attn.o_proj (input)")
    module: str  # the module that computed it
    error: float  # relative L2 over the shared tokens
    worst_sample: int  # the token where the two arms differ most
    worst_token: int

    def to_json(self) -> dict:
        return {"label": self.label, "module": self.module, "error": self.error, "worst_sample": self.worst_sample,
                "worst_token": self.worst_token}

    @classmethod
    def from_json(cls, data: dict) -> PointError:
        return cls(str(data["label"]), str(data["module"]), float(data["error"]), int(data["worst_sample"]), int(data["worst_token"]))


@dataclass(frozen=True, kw_only=True, slots=True)
class Divergence:
    where: Where
    arm: str  # the two arms re-run with capture (their text forms)
    against: str
    threshold: float = math.nan
    bound: Bound | None = None
    forward: tuple[PointError, ...] = ()  # forward order
    backward: tuple[PointError, ...] = ()  # backward order
    first: int | None = None  # index into `forward` (FORWARD) or `backward` (BACKWARD, LOSS) of the first point over
    tokens: int = 0  # tokens both arms computed
    reason: str = ""  # UNAVAILABLE: why
    seconds: float = 0.0

    @property
    def first_point(self) -> PointError | None:
        trail = self.forward if self.where is Where.FORWARD else self.backward
        return None if self.first is None else trail[self.first]

    def sentence(self) -> str:
        """One line for people: the console, the Markdown summary, the JUnit message."""
        point = self.first_point
        if self.where is Where.FORWARD:
            return (f"first divergent module: {point.module} (at {point.label}: relative error {point.error:.3g} > "
                    f"{self.threshold:.3g}; every point before it within the bound)")
        if self.where is Where.LOSS:
            return (f"no module diverges in the forward; the loss does: the gradient into {point.label}, the first point the "
                    f"backward reaches, already differs (relative error {point.error:.3g} > {self.threshold:.3g})")
        if self.where is Where.BACKWARD:
            return (f"the forward agrees everywhere; first divergent module in backward order: {point.module} "
                    f"(gradient at {point.label}: relative error {point.error:.3g} > {self.threshold:.3g})")
        if self.where is Where.NOWHERE:
            return (f"no captured module parts, forward or backward ({len(self.forward)} points, {self.tokens} tokens): "
                    "whatever differs is in what the engine reports, not in what its model computes")
        return f"where the arms part was not located: {self.reason}"

    def to_json(self) -> dict:
        return {"where": self.where.value, "arm": self.arm, "against": self.against, "threshold": self.threshold,
                "bound": None if self.bound is None else self.bound.to_json(), "first": self.first, "tokens": self.tokens,
                "forward": [p.to_json() for p in self.forward], "backward": [p.to_json() for p in self.backward],
                "reason": self.reason, "seconds": round(self.seconds, 3), "sentence": self.sentence()}

    @classmethod
    def from_json(cls, data: dict) -> Divergence:
        return cls(where=Where(data["where"]), arm=str(data["arm"]), against=str(data["against"]),
                   threshold=float(data["threshold"]), first=data["first"], tokens=int(data["tokens"]),
                   bound=None if data.get("bound") is None else Bound.from_json(data["bound"]),
                   forward=tuple(PointError.from_json(p) for p in data["forward"]),
                   backward=tuple(PointError.from_json(p) for p in data["backward"]),
                   reason=str(data["reason"]), seconds=float(data["seconds"]))


def unavailable(arm: str, against: str, reason: str) -> Divergence:
    return Divergence(where=Where.UNAVAILABLE, arm=arm, against=against, reason=reason)


def first_divergence(arm: str, a: Activations, against: str, b: Activations, threshold: float, bound: Bound,
                     samples: Sequence[int] | None = None) -> Divergence:
    """Where `a` first parts from `b` by more than `threshold`, on the tokens both computed; with `samples`, on those
    samples' tokens only (the others differ on purpose: a document the scenario replaced, of another length even)."""
    if a.dims != b.dims or len(a.lengths) != len(b.lengths) or (samples is None and a.lengths != b.lengths):
        return unavailable(arm, against, f"the two captures are of different batches ({len(a.lengths)} vs {len(b.lengths)} samples, "
                                         f"{a.dims} vs {b.dims} directions)")
    kept = range(len(a.lengths)) if samples is None else samples
    if any(a.lengths[i] != b.lengths[i] for i in kept):
        return unavailable(arm, against, "a sample the two arms must agree on has another length in each")
    rows_a, rows_b = sample_rows(a.lengths, kept), sample_rows(b.lengths, kept)
    both = (a.seen[rows_a] > 0) & (b.seen[rows_b] > 0)
    rows_a, rows_b = rows_a[both], rows_b[both]
    offsets = torch.tensor([0, *a.lengths[:-1]], dtype=torch.long).cumsum(0)
    theirs = {p.label for p in b.points}
    points = {p.label: p for p in a.points if p.label in theirs}
    if not points or not len(rows_a):
        return unavailable(arm, against, "the two arms share no captured module (their engines name their modules differently)"
                           if not points else "the two arms computed no token in common")

    def trail(part: str, labels: list[str]) -> tuple[PointError, ...]:
        return tuple(point_error(points[label], getattr(a, part)[label][rows_a], getattr(b, part)[label][rows_b], rows_a, offsets)
                     for label in labels if label in getattr(a, part) and label in getattr(b, part))

    forward = trail("forward", list(points))
    backward = trail("backward", [label for label in a.backward_order if label in points])
    found = dict(arm=arm, against=against, threshold=threshold, bound=bound, forward=forward, backward=backward, tokens=len(rows_a))
    over = lambda errors: next((i for i, e in enumerate(errors) if not e.error <= threshold), None)  # noqa: E731 - NaN is over
    if (first := over(forward)) is not None:
        return Divergence(where=Where.FORWARD, first=first, **found)
    if (first := over(backward)) is not None:
        return Divergence(where=Where.LOSS if first == 0 else Where.BACKWARD, first=first, **found)
    return Divergence(where=Where.NOWHERE, **found)


def sample_rows(lengths: list[int], samples: Sequence[int]) -> torch.Tensor:
    """The flat rows (Activations' layout) of `samples`' tokens, in sample order."""
    offsets = [0, *itertools.accumulate(lengths)]
    return torch.tensor([row for i in samples for row in range(offsets[i], offsets[i + 1])], dtype=torch.long)


def point_error(point: Point, a_ND: torch.Tensor, b_ND: torch.Tensor, rows: torch.Tensor, offsets: torch.Tensor) -> PointError:
    """Relative L2 of a against b over the rows, and the row (sample, token) where they differ most."""
    diff_N = (a_ND.double() - b_ND.double()).norm(dim=1)
    scale = b_ND.double().norm()
    total = diff_N.norm()
    error = 0.0 if total == 0 else (math.inf if scale == 0 else float(total / scale))
    row = int(rows[int(diff_N.argmax())])
    sample = int(torch.searchsorted(offsets, torch.tensor(row), right=True)) - 1
    return PointError(point.label, point.module, error, sample, row - int(offsets[sample]))
