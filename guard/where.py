"""Where a failing check's packed run first parts from the documents run alone: both run again with activation capture
(harness/engines/capture.py's recorder, the scenarios' own), and the points compared in forward then backward order
(harness/compare/divergence.py). The threshold is measured, as the check's: K x the largest distance of any point
in the forward between the same-precision per-document run and the oracle's (the same capture on the other-precision copy).
Only a failing check pays for this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from packcheck.guard.batch import Document
from packcheck.guard.runs import Step, per_document_run
from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.divergence import Divergence, first_divergence, point_error, sample_rows
from packcheck.harness.compare.same_precision import K
from packcheck.harness.contract.activations import Activations, CaptureRequest
from packcheck.harness.engines.capture import ActivationRecorder


def first_divergent(model: nn.Module, batch: Mapping[str, object], step: Step, documents: tuple[Document, ...],
                    normaliser: float, reference: nn.Module, truth: nn.Module) -> Divergence:
    """`reference` and `truth`: the same-precision model and the oracle's (one of them `model` itself, check.py)."""
    lengths = [d.length for d in documents]
    packed = _captured(model, lengths, lambda: _packed(model, batch, step, documents))
    alone = _captured(model, lengths, lambda: _alone(model, batch, documents, normaliser))
    other = truth if reference is model else reference
    with torch.autocast(device_type=next(other.parameters()).device.type, enabled=False):
        theirs = _captured(other, lengths, lambda: _alone(other, batch, documents, normaliser))
    own = _largest_distance(alone, theirs)
    threshold, bound = K * own, Bound(field="guard_activation", source=Source.GOLDEN_FLOOR, floor=own,
                                      term=f"{K:g} x the per-document run's largest distance from the oracle's at any point of the forward, {own:.3g}")
    return first_divergence("packed", packed, "per-document", alone, threshold, bound)


def _captured(model: nn.Module, lengths: list[int], run) -> Activations:
    recorder = ActivationRecorder(CaptureRequest(), lengths)
    recorder.attach(model)
    try:
        _RECORDERS.append(recorder)
        run()
    finally:
        _RECORDERS.pop()
        recorder.detach()
        for p in model.parameters():
            p.grad = None
    return recorder.finish()


_RECORDERS: list[ActivationRecorder] = []


def _packed(model: nn.Module, batch: Mapping[str, object], step: Step, documents: tuple[Document, ...]) -> None:
    rows, tokens = batch["input_ids"].shape
    sample = torch.full((rows, tokens), -1, dtype=torch.long)
    token = torch.full((rows, tokens), -1, dtype=torch.long)
    for i, d in enumerate(documents):
        sample[d.row, d.start:d.end] = i
        token[d.row, d.start:d.end] = torch.arange(d.length)
    _RECORDERS[-1].place(sample, token)
    out = step(model, batch)
    (out if isinstance(out, torch.Tensor) else out.loss).backward()


def _alone(model: nn.Module, batch: Mapping[str, object], documents: tuple[Document, ...], normaliser: float) -> None:
    recorder = _RECORDERS[-1]
    per_document_run(model, batch, documents, normaliser,
                     before=lambda i, d: recorder.place(torch.full((1, d.length), i, dtype=torch.long), torch.arange(d.length)[None]))


def _largest_distance(a: Activations, b: Activations) -> float:
    rows = sample_rows(a.lengths, range(len(a.lengths)))
    offsets = torch.tensor([0, *a.lengths[:-1]], dtype=torch.long).cumsum(0)
    # the forward's points only: a backward point whose true gradient is ~0 (a position no target reaches) has a relative
    # error of ~1 between two correct precisions, which would lift the threshold over any packing bug
    errors = [point_error(p, a.forward[p.label][rows], b.forward[p.label][rows], rows, offsets).error
              for p in a.points if p.label in a.forward and p.label in b.forward]
    return max((e for e in errors if math.isfinite(e)), default=0.0)
