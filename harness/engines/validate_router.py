"""Validate a MoE StepResult's optional router reports: the aux loss and the tokens per expert.

`router_tokens_per_expert` is checked against what the harness knows without any engine: one row per
layer, one column per expert of the checkpoint's config, and every row sums to exactly
k x (the real tokens of the global batch), since every real token is routed to k experts in every
sparse layer and padding to none (docs/contract.md, "MoE router reports").
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines.problems import Problem, ProblemKind, non_finite


def router_shape(checkpoint: str) -> tuple[int, int] | None:
    """(experts, experts per token) from the checkpoint's config.json; None for a dense model."""
    config = json.loads((Path(checkpoint) / "config.json").read_text())
    experts = config.get("num_experts", config.get("num_local_experts"))
    return (int(experts), int(config["num_experts_per_tok"])) if experts else None


def check_router_reports(case: Case, result: StepResult, problems: list[Problem]) -> None:
    aux = result.aux_loss
    if aux is not None and (not isinstance(aux, (int, float)) or isinstance(aux, bool) or not math.isfinite(aux)):
        problems.append(Problem(kind=ProblemKind.NON_FINITE if non_finite(aux) else ProblemKind.TYPE, field="aux_loss", sentence=(
            f"result.aux_loss is {aux!r:.80}, expected a finite float (or None when the engine does not report it)")))
    counts = result.router_tokens_per_expert
    if counts is None:
        return

    def problem(kind: ProblemKind, sentence: str) -> None:
        problems.append(Problem(kind=kind, field="router_tokens_per_expert", sentence=sentence))

    shape = router_shape(case.model.checkpoint)
    if shape is None:
        problem(ProblemKind.VALUE, f"result.router_tokens_per_expert is set but {case.model.family!r} has no experts: leave it None")
        return
    experts, top_k = shape
    if not isinstance(counts, torch.Tensor) or counts.is_floating_point() or counts.is_complex() or counts.dtype == torch.bool:
        what = counts.dtype if isinstance(counts, torch.Tensor) else type(counts).__name__
        problem(ProblemKind.DTYPE if isinstance(counts, torch.Tensor) else ProblemKind.TYPE,
                f"result.router_tokens_per_expert is {what}, expected an integer tensor [layers, experts] of counts")
        return
    if counts.dim() != 2 or counts.shape[1] != experts:
        problem(ProblemKind.SHAPE, f"result.router_tokens_per_expert has shape {tuple(counts.shape)}, expected [sparse layers, {experts}]")
        return
    if bool((counts < 0).any()):
        problem(ProblemKind.VALUE, "result.router_tokens_per_expert has negative counts")
        return
    real = sum(len(s.input_ids) for s in case.samples)
    bad = [(layer, int(total)) for layer, total in enumerate(counts.sum(1).tolist()) if total != top_k * real]
    if bad:
        layer, total = bad[0]
        problem(ProblemKind.VALUE,
            f"result.router_tokens_per_expert row {layer} sums to {total}, expected {top_k} x {real} = {top_k * real}: every real "
            f"token of the global batch routed to {top_k} experts, padding to none ({'more: padding counted' if total > top_k * real else 'fewer: tokens missing, or counts of one rank only'})"
        )
