"""Caps on what an engine can make the harness store or render: its notes, and the tensors of a result
it breaks the contract with. A real engine never comes near them (notes are a few short diagnostics;
a valid result holds exactly the checkpoint's parameters); a hostile or runaway one (100 MB of notes,
a 512 MiB tensor under a name the checkpoint lacks) would otherwise be copied into every file of the
run. What a cap drops is said, naming the cap, in the result's notes, which the report shows.

    result = capped_notes(result)                # before validation, in the engine's rank 0
    kept = tensors_worth_keeping(case, result)   # an invalid result, before it is saved for the report
"""

from __future__ import annotations

import json
from dataclasses import replace

import torch

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines.validate import checkpoint_shapes

NOTES_LIMIT = 64 * 1024  # bytes of StepResult.notes as JSON
CAP_NOTE = "packcheck_cap"  # the key of the note that says what a cap dropped
ROUTER_LIMIT = 1 << 16  # counts in router_tokens_per_expert: [sparse layers, experts] of any released MoE is far below


def capped_notes(result: object) -> object:
    """`result` with its notes replaced by one sentence naming the cap when they are over NOTES_LIMIT as JSON
    (notes that are not JSON are left to validation, which names them)."""
    if not isinstance(result, StepResult) or not isinstance(result.notes, dict):
        return result
    try:
        size = len(json.dumps(result.notes).encode("utf-8", "backslashreplace"))
    except (TypeError, ValueError, RecursionError):
        return result
    if size <= NOTES_LIMIT:
        return result
    return replace(result, notes={CAP_NOTE: f"the engine's notes ({size:,} bytes as JSON, {len(result.notes)} keys) are over "
                                            f"packcheck's cap of {NOTES_LIMIT // 1024} KiB for StepResult.notes and were dropped"})


def tensors_worth_keeping(case: Case, result: StepResult) -> StepResult:
    """An invalid `result` without the tensors no comparison can use (a name the checkpoint lacks, a shape it does
    not have, a per-token tensor of another length than its sample): kept for the report, never larger than a valid
    result. What was dropped is named in its notes."""
    expected = checkpoint_shapes(case.model.checkpoint)
    dropped = []

    def keep(field: str, tensors: dict | None) -> dict | None:
        if not isinstance(tensors, dict):
            return tensors
        kept = {name: t for name, t in tensors.items() if name in expected and tuple(getattr(t, "shape", ())) == expected[name]}
        dropped.extend(f"{field}[{str(name)[:60]!r}]" for name in tensors if name not in kept)
        return kept

    def per_token(field: str, tensors: list | None) -> list | None:
        """A list of one tensor per sample: one of another length than its sample's becomes an empty tensor (a 1 GiB
        logprobs[0] was once saved and copied whole)."""
        if not isinstance(tensors, (list, tuple)):
            return tensors
        kept = []
        for i, t in enumerate(tensors):
            fits = i < len(case.samples) and tuple(getattr(t, "shape", ())) == (len(case.samples[i].input_ids),)
            kept.append(t if fits or not isinstance(t, torch.Tensor) else t.new_empty(0))
            if not fits and isinstance(t, torch.Tensor) and i < len(case.samples):
                dropped.append(f"{field}[{i}]")
        if len(kept) > len(case.samples):
            dropped.append(f"{field}[{len(case.samples)}:] (the case has {len(case.samples)} samples)")
        return kept[:len(case.samples)]

    grads, params_after = keep("grads", result.grads), keep("params_after", result.params_after)
    logprobs, dloss = per_token("logprobs", result.logprobs), per_token("dloss_dlogprobs", result.dloss_dlogprobs)
    router = result.router_tokens_per_expert
    if isinstance(router, torch.Tensor) and router.numel() > ROUTER_LIMIT:
        router = None
        dropped.append("router_tokens_per_expert")
    advantages = result.advantages
    if isinstance(advantages, torch.Tensor) and tuple(advantages.shape) != (len(case.samples),):
        advantages = None
        dropped.append("advantages")
    if not dropped:
        return result
    said = ", ".join(dropped[:3]) + (f" and {len(dropped) - 3} more" if len(dropped) > 3 else "")
    notes = result.notes if isinstance(result.notes, dict) else {}
    return replace(result, grads=grads, params_after=params_after, logprobs=logprobs, dloss_dlogprobs=dloss,
                   router_tokens_per_expert=router, advantages=advantages, notes={**notes, CAP_NOTE: (
        f"not kept: {said} (a name or shape the checkpoint or the case does not have; packcheck keeps only the "
        "checkpoint's parameters and the case's tokens of an invalid result)")})
