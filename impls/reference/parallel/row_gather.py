"""The whole row for the layers that need it (GatedDeltaNet's conv and recurrence) under context
parallelism: all-gather the shards of the CP group, run on the whole row, keep this rank's shard.

Both cp styles (ulysses, ring) use it: a recurrence over a row has no head-parallel or
ring-of-blocks form that is exact without passing states, and gathering is what is exactly right
first (docs/distributed.md). The layer's input is gathered with an autograd-aware all-gather
(comm.all_gather), whose backward sums the ranks' gradients of the whole row.
"""

from __future__ import annotations

from packcheck.impls.reference.model.row_shards import RowShards
from packcheck.impls.reference.parallel.comm import all_gather, all_gather_no_grad
from packcheck.impls.reference.parallel.mesh import Mesh

SEQ = 1


def gathered_rows(mesh: Mesh) -> RowShards:
    group = mesh.cp_group
    return RowShards(
        count=mesh.cp,
        index=mesh.cp_rank,
        gather=lambda x_BS: all_gather(x_BS, group, dim=SEQ),
        gather_ids=lambda ids_BS: all_gather_no_grad(ids_BS, group, dim=SEQ),
    )
