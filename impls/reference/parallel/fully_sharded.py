"""Data parallelism through FSDP2 (`torch.distributed.fsdp.fully_shard`): parameters, gradients and
AdamW state sharded over the data-parallel group, gradients *summed* over the mesh.

`dp_style="shard"` of the contract. Each decoder layer is an FSDP unit, and the root holds the
rest (embeddings, final norm, head), as torchtitan wraps a model. Each data-parallel rank keeps
dim-0 shards of every parameter (DTensors); after the step's last backward each holds the
reduce-scattered shard of every gradient, and the optimizer (built on the sharded parameters)
keeps its state sharded the same way. Each rank backpropagates its own share of the global loss,
so the reduction is a sum (divide factor 1), as DDP's comm hook makes it in
parallel/data_parallel.py. Under context parallelism the mesh is 2-D (HSDP): the cp ranks of a
data-parallel rank hold the same shards (dim "cp" replicates, dim "dp" shards), and each
gradient is reduce-scattered over dp and all-reduced over cp.

Ranks may run different numbers of forwards in a micro-batch (rows and buckets differ per rank),
so nothing may be a collective per forward; every rank runs the same number of micro-batches (the
contract's partition, or a token budget's equalised cut), so a micro-batch may have collectives.
Parameters are all-gathered in a micro-batch's first forward and stay unsharded through its
forwards and backwards (reshard_after_forward False), then are freed after its last backward and
gathered again by the next micro-batch, as an FSDP2 engine that bounds its memory per micro-batch
does (which is what makes a rank that runs fewer micro-steps leave its peers waiting in an
all-gather: harness/contract/token_budget.py). Gradients accumulate unsharded without
communication until the rank's last backward, which alone reduce-scatters. Parameters a rank's
rows never reached are reduced as zeros (reduce_scatter_unused_params), like DDP's buckets.

torch.distributed.fsdp (and DTensor with it) is imported where a model is sharded, not with this
module: half a second of every rank's start-up, most of which never shard.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

import torch
from torch import nn

from packcheck.impls.reference.parallel.mesh import Mesh

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh


def data_parallel_mesh(mesh: Mesh) -> DeviceMesh:
    """The FSDP mesh: the dp group; with cp > 1, (cp replicate, dp shard) over the groups the mesh already has."""
    from torch.distributed.device_mesh import DeviceMesh

    device_type = "cuda" if mesh.device.startswith("cuda") else "cpu"
    if mesh.cp == 1:
        return DeviceMesh.from_group(mesh.dp_group, device_type, mesh_dim_names=("dp",))
    ranks_CD = torch.arange(mesh.world_size).reshape(mesh.dp, mesh.cp).T  # rank = dp_rank * cp + cp_rank
    return DeviceMesh.from_group([mesh.cp_group, mesh.dp_group], device_type, mesh=ranks_CD, mesh_dim_names=("cp", "dp"))


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    stack = model.model.language_model if hasattr(model.model, "language_model") else model.model  # a VLM nests its decoder
    return stack.layers


def missing_fsdp2_feature() -> str | None:
    """Why this torch's FSDP2 cannot shard the reference exactly, or None: every rank must reduce-scatter the same
    tensors even where a parameter got no gradient on some rank (an expert no token chose), which
    `set_reduce_scatter_unused_params` asks for (torch 2.11, on the GPU machines, has no such method)."""
    from torch.distributed.fsdp import FSDPModule

    if not hasattr(FSDPModule, "set_reduce_scatter_unused_params"):
        return (f"dp_style 'shard' needs FSDP2's set_reduce_scatter_unused_params, which torch {torch.__version__} lacks; "
                "use dp_style 'replicate' or a torch that has it (2.13 does)")
    return None


def shard_model(model: nn.Module, mesh: Mesh) -> nn.Module:
    """`model` sharded over the data-parallel group (every rank must call this, in the same order)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    fsdp_mesh = data_parallel_mesh(mesh)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=fsdp_mesh, reshard_after_forward=False)
    fully_shard(model, mesh=fsdp_mesh, reshard_after_forward=False)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # a sum: each rank's loss is its share of the global loss
            # plain SUM collectives: with a factor set, float32/bf16 would reduce with PREMUL_SUM, which gloo lacks
            module.set_force_sum_reduction_for_comms(True)
    model.set_reduce_scatter_unused_params(True)
    # the root first: a VLM encodes images through its (already sharded) tower before the root's forward runs
    model._get_fsdp_state()._lazy_init()
    return model


def is_fully_sharded(model: nn.Module) -> bool:
    fsdp = sys.modules.get("torch.distributed.fsdp")  # not imported: nothing was sharded
    return fsdp is not None and isinstance(model, fsdp.FSDPModule)


class ShardedGradientSync:
    """GradientSync's interface for a model `shard_model` sharded: only the rank's last backward reduces, the last
    backward of each micro-batch reshards."""

    def __init__(self, model: nn.Module):
        self.model = model

    @property
    def forward_module(self) -> nn.Module:
        return self.model

    def backward_context(self, last: bool, micro_batch_ends: bool):
        self.model.set_requires_gradient_sync(last)
        self.model.set_reshard_after_backward(micro_batch_ends)
        self.model.set_is_last_backward(last)
        return contextlib.nullcontext()
