"""Torch-release bridges: torchtitan 0.3.0 on a torch older than the one it was written against.

torchtitan 0.3.0 declares no torch floor but uses two names torch 2.11 (the GPU machines' torch,
torch 2.11.0+cu130 on the H200, docs/gpu.md) lacks; torch 2.12+ has both (this project's CPU pin,
torch 2.13, does). Neither touches what is under test (the document mask, the loss, the step), so
each is bridged here the way impls/adapters/hf_common/releases.py bridges transformers releases,
and each fails loudly where a real use would need what torch 2.11 does not have:

1. `from torch.distributed.fsdp import DataParallelMeshDims`, at import of
   torchtitan/distributed/full_dtensor.py (so of torchtitan.trainer and its llama3 model). It only
   builds FSDP mesh dims for data-parallel sharding; the adapter runs dp=1 without FSDP. Bridge: a
   placeholder class in torch.distributed.fsdp whose construction raises NotImplementedError.
2. `create_block_mask(..., separate_full_blocks=not is_in_batch_invariant_mode())`, in
   torchtitan/models/common/decoder.py `_create_flex_attention_mask` through its
   `create_attention_mask` (a compiled create_block_mask). torch 2.12+ defaults
   separate_full_blocks=True, which is what torch 2.11 always does: full blocks kept apart from
   partial ones, the same mask (False only applies mask_mod to every block, for batch
   invariance). Bridge: decoder's own `create_attention_mask` name (the narrowest place; torch's
   create_block_mask stays as it is) drops separate_full_blocks=True and raises on False.
"""

from __future__ import annotations

import functools
import inspect
from types import ModuleType
from typing import Callable

FSDP_REASON = ("torch.distributed.fsdp.DataParallelMeshDims is a placeholder: this torch predates it (it needs "
               "torch>=2.12) and the torchtitan adapter does not use FSDP (dp=1); run data-parallel sharding on torch>=2.12")
SEPARATE_FULL_BLOCKS_REASON = ("create_block_mask(separate_full_blocks=False) needs torch>=2.12: this torch always keeps "
                               "full blocks separate (separate_full_blocks=True); torchtitan's batch-invariant mode needs torch>=2.12")


def bridge_torch() -> None:
    """Install both bridges where this torch needs them (idempotent); call before importing torchtitan."""
    import torch.distributed.fsdp as fsdp
    from torch.nn.attention.flex_attention import create_block_mask

    add_data_parallel_mesh_dims(fsdp)
    if takes_separate_full_blocks(create_block_mask):
        return
    from torchtitan.models.common import decoder

    decoder.create_attention_mask = accepting_separate_full_blocks(decoder.create_attention_mask)


def add_data_parallel_mesh_dims(fsdp: ModuleType) -> None:
    """Give `fsdp` a DataParallelMeshDims that cannot be built, where it has none."""
    if hasattr(fsdp, "DataParallelMeshDims"):
        return

    class DataParallelMeshDims:
        """Placeholder for torch>=2.12's FSDP mesh dims (compat.py): importable, never constructible."""

        def __init__(self, *args, **kwargs):
            raise NotImplementedError(FSDP_REASON)

    DataParallelMeshDims.__module__ = fsdp.__name__
    fsdp.DataParallelMeshDims = DataParallelMeshDims


def takes_separate_full_blocks(create_block_mask: Callable) -> bool:
    return "separate_full_blocks" in inspect.signature(create_block_mask).parameters


def accepting_separate_full_blocks(create_mask: Callable) -> Callable:
    """`create_mask` (whose create_block_mask lacks the keyword) taking separate_full_blocks=True as what it does anyway."""
    if getattr(create_mask, "bridges_separate_full_blocks", False):
        return create_mask

    @functools.wraps(create_mask)
    def bridged(*args, separate_full_blocks: bool = True, **kwargs):
        if not separate_full_blocks:
            raise NotImplementedError(SEPARATE_FULL_BLOCKS_REASON)
        return create_mask(*args, **kwargs)

    bridged.bridges_separate_full_blocks = True
    return bridged
