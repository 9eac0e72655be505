"""Compare two StepResults of the same samples quantity by quantity: every token, every tensor."""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.compare.bound import RULE
from packcheck.harness.compare.comparison import Arms, Comparison
from packcheck.harness.compare.conditioning import error_weights
from packcheck.harness.compare.metrics import (Float64Buffers, batchable, batched_error_sums, error_sums, errors_from_sums, flat_index_to_position,
                                               rel, rel_nats, sums_to_host)
from packcheck.harness.compare.null_bound import METRICS, GradientNull
from packcheck.harness.compare.rounding_bound import Definition, at_least
from packcheck.harness.compare.router import compare_router
from packcheck.harness.compare.tolerances import Tolerance
from packcheck.harness.contract import OptimizerSpec, StepResult

Locate = Callable[[int, int], str]


def compare_logprobs(
    arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance, locate: Locate, samples: Iterable[int] | None = None
) -> Comparison:
    """The worst per-token log-prob difference over the chosen samples (all by default)."""
    indices = range(len(reference.logprobs)) if samples is None else samples
    worst, where = 0.0, ""
    for i in indices:
        diff = (observed.logprobs[i].double() - reference.logprobs[i].double()).abs()
        if diff.numel() and diff.max().item() > worst:
            worst = diff.max().item()
            first_bad = int((diff > tol.logprobs).nonzero()[0]) if (diff > tol.logprobs).any() else int(diff.argmax())
            where = locate(i, first_bad)
    return Comparison(arms=arms, quantity="logprobs", item="", metric="max_abs", observed=worst, **tol.by("logprobs"), where=where)


def compare_scalars(arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance,
                    definition: Definition | None = None) -> list[Comparison]:
    derived = None if definition is None else definition.loss_term([observed.loss, reference.loss], reference.loss, apart=observed.logprobs)
    return [
        Comparison(arms=arms, quantity="loss", item="", metric="rel_nats", observed=rel_nats(observed.loss, reference.loss),
                   **at_least(tol.by("loss"), derived), where=f"{observed.loss:.12g} vs {reference.loss:.12g}"),
        Comparison(arms=arms, quantity="num_loss_tokens", item="", metric="abs",
                   observed=float(abs(observed.num_loss_tokens - reference.num_loss_tokens)), **tol.by("count"),
                   where=f"{observed.num_loss_tokens} vs {reference.num_loss_tokens}"),
    ]


def compare_grad_norm(arms: Arms, observed: float, expected: float, tol: Tolerance, item: str = "") -> Comparison:
    """The pre-clip norm, a scalar judged as relatively as a loss: a rule of its own at the loss's threshold (no
    calibration measured grad_norm's noise, so it is not a calibrated comparison)."""
    return Comparison(arms=arms, quantity="grad_norm", item=item, metric="rel", observed=rel(observed, expected),
                      threshold=tol.loss, bound=RULE, where=f"{observed:.12g} vs {expected:.12g}")


def compare_tensors(arms: Arms, quantity: str, observed: dict, reference: dict, tol: Tolerance) -> list[Comparison]:
    """Relative L2 and max-relative error for every named tensor, judged by `tol`'s field of the same name as `quantity`,
    raised per tensor by the null of the arm compared against where the run measured one (gradients only)."""
    buffers, allowed = Float64Buffers(), tol.by(quantity)
    null = null_of(arms, tol) if quantity == "grad" else None
    names = sorted(reference)
    pairs = [(observed[name], reference[name]) for name in names]
    sums = None
    if batchable(pairs):  # a GPU run's results, both on the GPU: a few kernels per batch of tensors, not a dozen per tensor
        try:
            sums = batched_error_sums(pairs)
        except torch.OutOfMemoryError:  # the engine's next arm holds the GPU: one tensor at a time, as below
            sums = None
    if sums is None:
        sums = [error_sums(a, b, buffers=buffers) for a, b in pairs]
    return tensor_rows(arms, quantity, METRICS, {name: reference[name].shape for name in names}, sums, allowed, null)


def null_of(arms: Arms, tol: Tolerance) -> GradientNull | None:
    """The null of the engine arm `arms` is judged against, where the run measured one."""
    against = arms.against
    return tol.nulls.get(against.name) if isinstance(against, ArmId) and against.role is Role.ENGINE else None


def compare_params_after(arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance,
                         optimizer: OptimizerSpec | None) -> list[Comparison]:
    """Every parameter after the optimizer step: relative L2 and max-relative as for gradients, each
    element's error weighted by the step's conditioning there (harness/compare/conditioning.py)."""
    buffers, allowed = Float64Buffers(), tol.by("params_after")
    # the step sees the gradient clipped by the reference's norm: condition on what it saw
    clip = optimizer.clip_coefficient(reference.grad_norm) if optimizer is not None and reference.grad_norm is not None else 1.0
    sums, shapes = [], {}
    for name in sorted(reference.params_after):
        # each read once: the harness's own step computes a tensor when it is read (adamw_step.SteppedParameters)
        a, b = observed.params_after[name], reference.params_after[name]
        # a frozen parameter has no gradient: nothing conditions it (and it must not move at all)
        weights = error_weights(b, clip * reference.grads[name], optimizer) if name in reference.grads else None
        sums.append(error_sums(a, b, weights, buffers))
        shapes[name] = b.shape
    return tensor_rows(arms, "params_after", ("cond_rel_l2", "cond_max_rel"), shapes, sums, allowed)


def tensor_rows(arms: Arms, quantity: str, metrics: tuple[str, str], shapes: dict, sums: list, allowed: dict,
                null: GradientNull | None = None) -> list[Comparison]:
    """Two rows per tensor (its L2 and its worst element) from error_sums', brought back from the device in one copy."""
    rows = []
    for (name, shape), values in zip(shapes.items(), sums_to_host(sums)):
        l2, worst, index = errors_from_sums(values)
        where = f"element {flat_index_to_position(index, tuple(shape))}" if index >= 0 else ""
        bound = [allowed if null is None else null.allowed(name, metric, allowed) for metric in metrics]
        rows.append(Comparison(arms=arms, quantity=quantity, item=name, metric=metrics[0], observed=l2, **bound[0]))
        rows.append(Comparison(arms=arms, quantity=quantity, item=name, metric=metrics[1], observed=worst, **bound[1], where=where))
    return rows


def compare_dloss_dlogprobs(arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance, locate: Locate,
                            definition: Definition | None = None) -> list[Comparison]:
    if observed.dloss_dlogprobs is None or reference.dloss_dlogprobs is None:
        return []
    scale = max((t.double().abs().max().item() for t in reference.dloss_dlogprobs if t.numel()), default=0.0)
    worst, where = 0.0, ""
    for i, (a, b) in enumerate(zip(observed.dloss_dlogprobs, reference.dloss_dlogprobs)):
        diff = (a.double() - b.double()).abs()
        if diff.numel() and diff.max().item() > worst:
            worst, where = diff.max().item(), locate(i, int(diff.argmax()))
    observed_error = worst / scale if scale else (0.0 if worst == 0 else float("inf"))
    derived = None if definition is None else definition.weights_term([observed.dloss_dlogprobs, reference.dloss_dlogprobs], scale,
                                                                      apart=observed.logprobs)
    return [Comparison(arms=arms, quantity="dloss_dlogprobs", item="", metric="max_rel", observed=observed_error,
                       **at_least(tol.by("dloss_dlogprobs"), derived), where=where)]


def compare_all_but_tensors(arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance, locate: Locate,
                            definition: Definition | None = None) -> list[Comparison]:
    """compare_results' rows before its gradients and parameters: log-probs, loss, count, dloss/dlogprobs, the router."""
    return [compare_logprobs(arms, observed, reference, tol, locate), *compare_scalars(arms, observed, reference, tol, definition),
            *compare_dloss_dlogprobs(arms, observed, reference, tol, locate, definition), *compare_router(arms, observed, reference, tol)]


def compare_results(
    arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance, locate: Locate,
    *, samples: Iterable[int] | None = None, gradients: bool = True, optimizer: OptimizerSpec | None = None,
    definition: Definition | None = None,
) -> list[Comparison]:
    """Everything two arms of one engine must agree on: log-probs, loss, count, weights, every gradient,
    and the parameters after `optimizer`'s step and the MoE router reports when both report them. `definition`: the loss's
    definition at `reference`'s log-probs where the arms' loss and weights follow from their log-probs in a dtype that
    rounds (harness/compare/rounding_bound.py); None keeps the table."""
    if samples is not None:
        return [compare_logprobs(arms, observed, reference, tol, locate, samples)]
    rows = compare_all_but_tensors(arms, observed, reference, tol, locate, definition)
    if gradients:
        rows += compare_tensors(arms, "grad", observed.grads, reference.grads, tol)
    if observed.params_after is not None and reference.params_after is not None:
        rows += compare_params_after(arms, observed, reference, tol, optimizer)
    return rows
