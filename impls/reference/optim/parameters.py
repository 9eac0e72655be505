"""Which parameters train, and a parameter (or gradient) whole however the mesh holds it.

Frozen parameters (ModelSpec.frozen) have requires_grad False: no gradient, not in the optimizer.
Under FSDP2 (parallel/fully_sharded.py) every parameter and gradient is a DTensor holding this
rank's shard; `full_tensor` all-gathers it (a collective: every rank calls it, in the same order), as it does an expert
parallel rank's slice of the experts (parallel/expert_shard.py).
"""

from __future__ import annotations

import sys

import torch

from packcheck.impls.reference.parallel.expert_shard import expert_shard_of


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters that train: frozen ones (ModelSpec.frozen) take no gradient and stay out of the optimizer."""
    return [p for p in model.parameters() if p.requires_grad]


def is_sharded(tensor: torch.Tensor) -> bool:
    """A DTensor? Asked without importing torch.distributed.tensor (half a second of every rank's start-up):
    a tensor can only be one once FSDP2 (parallel/fully_sharded.py) has imported it."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def full_tensor(parameter: torch.Tensor) -> torch.Tensor:
    """A parameter whole: an FSDP-sharded one (a DTensor) all-gathered, an expert slice all-gathered over its EP group."""
    if (experts := expert_shard_of(parameter)) is not None:
        return experts.whole(parameter)
    return parameter.full_tensor() if is_sharded(parameter) else parameter


def local_part(tensor: torch.Tensor) -> torch.Tensor:
    """What this rank holds of `tensor`: its shard of a DTensor, else the tensor itself."""
    return tensor.to_local() if is_sharded(tensor) else tensor

