"""Error metrics between an observed tensor and a reference tensor of the same shape."""

from __future__ import annotations

import torch


def _difference(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    diff = observed.double() - reference.double()
    return diff if weights is None else diff / weights


def rel_l2(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> float:
    """||(observed - reference) / weights|| / ||reference||, computed in float64; 0 when both are zero.
    `weights` (>= 1, elementwise; default 1) widen the allowance of elements known to be ill-conditioned."""
    diff = torch.linalg.vector_norm(_difference(observed, reference, weights).flatten()).item()
    scale = torch.linalg.vector_norm(reference.double().flatten()).item()
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def max_abs(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> tuple[float, int]:
    """The largest |observed - reference| / weights and the flat index where it occurs."""
    diff = _difference(observed, reference, weights).abs().flatten()
    if diff.numel() == 0:
        return 0.0, -1
    index = int(diff.argmax())
    return float(diff[index]), index


def max_rel(observed: torch.Tensor, reference: torch.Tensor, weights: torch.Tensor | None = None) -> tuple[float, int]:
    """max |observed - reference| / weights / max |reference|, and the flat index of the worst element."""
    error, index = max_abs(observed, reference, weights)
    scale = reference.double().abs().max().item() if reference.numel() else 0.0
    if scale == 0.0:
        return (0.0 if error == 0.0 else float("inf")), index
    return error / scale, index


def rel(observed: float, reference: float) -> float:
    if reference == 0.0:
        return 0.0 if observed == 0.0 else float("inf")
    return abs(observed - reference) / abs(reference)


def rel_nats(observed: float, reference: float) -> float:
    """A loss's error: relative for a loss of one nat or more, absolute (in nats) below. A policy loss near zero is a
    difference of terms of a nat or so (measured on an H200, float32: -1.5187e-4 vs -1.5157e-4, 3e-7 nats apart,
    is 1.9e-3 relative), so its relative error measures the cancellation, not the engine."""
    return abs(observed - reference) / max(abs(reference), 1.0)


def flat_index_to_position(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    position = []
    for size in reversed(shape):
        position.append(index % size)
        index //= size
    return tuple(reversed(position))
