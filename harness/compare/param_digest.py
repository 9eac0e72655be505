"""One rank's parameters after an optimizer step as digests: each tensor's bytes hashed, by canonical name.

Rank 0's StepResult is the only one the harness keeps whole; a rank whose replica drifted (its own gradient
stepped, part of the data-parallel reduction missed) returns nothing rank 0 shows. So the launch worker digests,
on every rank of a distributed case that takes an optimizer step, the `params_after` of that rank's own StepResult
(harness/launch/worker.py), and the digests are compared across ranks (harness/compare/replicas.py). The worker
computes them, not the engine: an engine cannot report agreement it does not have.

A digest is `{name: {"dtype", "shape", "sha256"}}` in canonical (sorted) name order: the sha256 of the tensor's bytes
as this rank holds them, row-major, with its dtype and shape beside it, so two digests are equal exactly when the
tensors are equal bit for bit. Of a DTensor (an FSDP2 parameter returned as it is held) the rank's own shard is
hashed, with the shard's shape: the comparison then says it is not the whole tensor. A value that is not a tensor,
or whose bytes cannot be read, is left out: the comparison names it as missing.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping

import torch

from packcheck.harness.contract import StepResult

Digest = dict[str, dict]  # canonical name -> {"dtype": "float64", "shape": [16, 64], "sha256": "..."}


def params_digest(result: object) -> Digest | None:
    """The digest of `result.params_after`, or None where `result` reports no parameters (None, or no StepResult)."""
    params = result.params_after if isinstance(result, StepResult) else None
    if not isinstance(params, Mapping):
        return None
    digest = {}
    for name, value in sorted(params.items(), key=lambda item: str(item[0])):
        entry = tensor_digest(value)
        if entry is not None:
            digest[str(name)] = entry
    return digest


def tensor_digest(value: object) -> dict | None:
    """dtype, shape and the sha256 of the bytes of `value` as this rank holds it; None where it is no readable tensor."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        held = value.to_local() if _is_dtensor(value) else value
        host = held.detach().to("cpu").contiguous()
        hashed = hashlib.sha256(host.reshape(-1).view(torch.uint8).numpy()).hexdigest()
    except Exception:  # noqa: BLE001 - a meta tensor, a sparse one: whatever cannot be read as bytes is named missing
        return None
    return {"dtype": str(held.dtype).removeprefix("torch."), "shape": list(held.shape), "sha256": hashed}


def _is_dtensor(value: torch.Tensor) -> bool:
    """A DTensor, asked without importing torch.distributed.tensor (only FSDP2 makes one, and it imports it)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(value, module.DTensor)
