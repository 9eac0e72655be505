"""The engine side of activation capture: the hook an engine opts in through, so a localisation can say where two of
its arms first part (harness/run/localise.py; the data it reports: harness/contract/activations.py).

An engine declares `Capabilities(activations=True)` and, inside `run`, when a capture was asked for:

    recorder = active_recorder()            # None on every ordinary run: nothing is hooked, nothing slows
    if recorder is not None:
        recorder.attach(model)              # its named_modules name the capture points
    ...
    for each forward of the step:
        if recorder is not None:
            recorder.place(sample_BT, token_BT)   # which (sample, token) each position holds, -1 for padding
        logits = model(...)                 # the hooks project every module's output and, on the backward, its gradient

A transformers model's `named_modules` is all the naming it takes (impls/adapters/hf_common does exactly this). Only
forwards inside the attached model's own call with gradients on are recorded (a no-grad routing pre-pass, a
recomputation under activation checkpointing are not). A value is recorded when its leading dimensions are the
forward's positions ([B, T, ...], a vector or more per position); others (an expert's routed tokens, a router's
flattened logits) are left out.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from packcheck.harness.contract import Case
from packcheck.harness.contract.activations import Activations, CaptureRequest, Point, PointKind

ROWS_PER_PROJECTION = 256  # a vocabulary-wide value (logits) is projected this many positions at a time


class ActivationRecorder:
    def __init__(self, request: CaptureRequest, lengths: list[int], store: torch.dtype = torch.float64):
        self.request, self.lengths, self.store = request, lengths, store
        self.offsets = torch.tensor([0, *lengths[:-1]], dtype=torch.long).cumsum(0)
        self.total = sum(lengths)
        self.attached = False
        self.points: dict[str, Point] = {}  # label -> point, in forward order
        self.forward: dict[str, torch.Tensor] = {}
        self.backward: dict[str, torch.Tensor] = {}
        self.backward_order: list[str] = []
        self.seen = torch.zeros(self.total, dtype=torch.float64)
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None
        self._rows: tuple[torch.Tensor, torch.Tensor, tuple[int, int]] | None = None  # valid positions, their rows, (B, T)
        self._produced: dict[int, torch.Tensor] = {}  # this forward's recorded values by identity: an input already seen
        self._directions: dict[tuple[int, torch.device], torch.Tensor] = {}
        self._handles: list = []

    def attach(self, model: nn.Module) -> None:
        """Hook every module of `model` (its named_modules name the points); the model's own call frames a forward."""
        self.attached = True
        self._handles += [model.register_forward_pre_hook(self._begin), model.register_forward_hook(self._end)]
        names = dict(model.named_modules())
        parents = {id(child): name for name, module in names.items() for child in module.children()}
        for name, module in names.items():
            if name:
                leaf = next(module.children(), None) is None
                self._handles.append(module.register_forward_hook(self._hook(name, parents[id(module)], leaf), with_kwargs=True))

    def detach(self) -> None:
        """Remove every hook `attach` put on the model (a model that lives on after the capture: the guard's)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def place(self, sample_BT: torch.Tensor, token_BT: torch.Tensor) -> None:
        """The (sample, token) of each position of the next forward of the attached model (-1: padding)."""
        self._pending = (sample_BT.detach().cpu().long(), token_BT.detach().cpu().long())

    def finish(self) -> Activations | None:
        """What was recorded, or None if the engine attached no model."""
        if not self.attached:
            return None
        points = list(self.points.values())
        return Activations(lengths=list(self.lengths), dims=self.request.dims, points=points,
                           forward={p.label: self.forward[p.label].cpu() for p in points},
                           backward={label: value.cpu() for label, value in self.backward.items()},
                           backward_order=list(self.backward_order), seen=self.seen)

    # -- the hooks -------------------------------------------------------------------------------

    def _begin(self, module, args) -> None:
        self._produced.clear()
        self._rows = None
        if self._pending is not None and torch.is_grad_enabled():
            sample_BT, token_BT = self._pending
            flat_sample, flat_token = sample_BT.reshape(-1), token_BT.reshape(-1)
            valid = (flat_sample >= 0).nonzero().flatten()
            rows = self.offsets[flat_sample[valid]] + flat_token[valid]
            self.seen[rows] = 1.0
            self._rows = (valid, rows, tuple(sample_BT.shape))
        self._pending = None

    def _end(self, module, args, output) -> None:
        self._produced.clear()
        self._rows = None

    def _hook(self, name: str, parent: str, leaf: bool):
        def hook(module, args, kwargs, output):
            if self._rows is None:
                return
            given = args[0] if args else kwargs.get("hidden_states")
            if leaf and isinstance(given, torch.Tensor) and id(given) not in self._produced:
                self._record(Point(name, PointKind.INPUT, parent), given)
            value = output if isinstance(output, torch.Tensor) else next(
                (v for v in output if isinstance(v, torch.Tensor)), None) if isinstance(output, (tuple, list)) else None
            if value is not None and id(value) not in self._produced:
                self._record(Point(name, PointKind.OUTPUT, name), value)
        return hook

    def _record(self, point: Point, value: torch.Tensor) -> None:
        self._produced[id(value)] = value
        valid, rows, (B, T) = self._rows
        if not value.is_floating_point():
            return  # token ids, masks: the arms' inputs, not what a module computed
        if value.dim() < 3 or tuple(value.shape[:2]) != (B, T):
            return  # not one vector per position: an expert's routed tokens, a router's flat logits
        flat = value.reshape(B * T, -1)
        label = point.label
        self.points.setdefault(label, point)
        self._store(self.forward, label, flat.detach(), valid, rows)
        if value.requires_grad:
            def on_grad(grad: torch.Tensor) -> None:
                if label not in self.backward:
                    self.backward_order.append(label)
                self._store(self.backward, label, grad.detach().reshape(B * T, -1), valid, rows)
            value.register_hook(on_grad)

    def _store(self, into: dict[str, torch.Tensor], label: str, flat: torch.Tensor, valid: torch.Tensor, rows: torch.Tensor) -> None:
        projected = self._project(flat[valid.to(flat.device)])
        if label not in into:
            into[label] = torch.zeros(self.total, self.request.dims, dtype=self.store, device=projected.device)
        into[label][rows.to(projected.device)] = projected.to(self.store)

    def _project(self, flat: torch.Tensor) -> torch.Tensor:
        """[n, H] -> [n, dims] in float64: the same directions for the same H in every arm."""
        key = (flat.shape[1], flat.device)
        if key not in self._directions:
            generator = torch.Generator().manual_seed(self.request.seed * 1_000_003 + flat.shape[1])
            directions = torch.randn(flat.shape[1], self.request.dims, generator=generator, dtype=torch.float64)
            self._directions[key] = (directions / self.request.dims ** 0.5).to(flat.device)
        directions = self._directions[key]
        return torch.cat([part.double() @ directions for part in flat.split(ROWS_PER_PROJECTION)]) if len(flat) else (
            torch.zeros(0, self.request.dims, dtype=torch.float64, device=flat.device))


_ACTIVE: list[ActivationRecorder] = []


def active_recorder() -> ActivationRecorder | None:
    """The recorder of the capture asked for now, or None (every ordinary run)."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def recording(request: CaptureRequest, case: Case) -> Iterator[ActivationRecorder]:
    """Capture on, for one run of `case` (the worker's "capture" mode, harness/launch/worker.py)."""
    store = torch.float64 if case.dtype == "float64" else torch.float32  # a lower-precision value loses nothing in float32
    recorder = ActivationRecorder(request, [len(s.input_ids) for s in case.samples], store)
    _ACTIVE.append(recorder)
    try:
        yield recorder
    finally:
        _ACTIVE.remove(recorder)
