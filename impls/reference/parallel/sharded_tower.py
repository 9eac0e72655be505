"""The vision tower sharded with FSDP2 (`torch.distributed.fsdp.fully_shard`) over every rank of
the mesh, in a process group of its own.

Each rank keeps 1/world of every tower parameter and all-gathers the whole tower at the start of
each tower forward (then frees it again: reshard_after_forward), so every encode is a collective
on every rank, as in an FSDP-trained VLM. The group is the tower's own (as an FSDP mesh dimension
is), so a rank that skips the tower on a text-only micro-batch leaves the others waiting in the
tower's all-gather while it waits in the next collective of another group: the deadlock of
BUGS.md vision-skip-hang, which the harness's watchdog reports per rank. The text model stays
under DistributedDataParallel (parallel/data_parallel.py); the frozen tower has no gradient for
DDP to reduce.
"""

from __future__ import annotations

from torch import nn

from packcheck.impls.reference.parallel.mesh import Mesh, group_of


def shard_tower(tower: nn.Module, mesh: Mesh) -> nn.Module:
    """`tower` sharded over the dp x cp ranks of this layer slice (every rank must call this, in the same order)."""
    group = group_of(mesh.data_ranks)
    device_type = "cuda" if mesh.device.startswith("cuda") else "cpu"
    from torch.distributed.device_mesh import DeviceMesh  # with FSDP2, only where a tower is sharded (fully_sharded.py)
    from torch.distributed.fsdp import fully_shard

    fully_shard(tower, mesh=DeviceMesh.from_group(group, device_type), reshard_after_forward=True)
    return tower
