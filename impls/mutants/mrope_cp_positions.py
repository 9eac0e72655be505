"""mutant.mrope-cp-positions: MRoPE positions recomputed per context-parallel shard.

Where it happened: Megatron-LM PR #1612, NeMo Automodel PR #1482 (3D positions sharded on the
wrong dimension or computed on the wrong rank). Here each shard computes its documents' 3D
positions as if the shard were a row of its own: the part of a document that a shard cut moves
onto the next rank restarts at position 0 on every axis, so its queries rotate with other
positions than the keys the other rank holds. Segment ids stay global, so this is the position
bug alone.

Shapes: B rows, T tokens of the shard.
"""

import dataclasses

import torch

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def shard_with_local_mrope(predictions: Predictions, mesh: Mesh) -> Predictions:
    part = predictions.shard(mesh.cp_rank, mesh.cp)
    positions_BT3 = part.position_ids_BT
    if positions_BT3.dim() != 3:  # a text-only model: no MRoPE
        return part
    segments_BT = part.segment_ids_BT
    starts_BT = torch.ones_like(segments_BT, dtype=torch.bool)
    starts_BT[:, 1:] = segments_BT[:, 1:] != segments_BT[:, :-1]  # the bug: the shard start is where positions begin
    index_BT = torch.arange(segments_BT.shape[1]).expand_as(segments_BT)
    run_start_BT = torch.where(starts_BT, index_BT, 0).cummax(dim=1).values
    first_BT3 = positions_BT3.gather(1, run_start_BT[..., None].expand(-1, -1, 3))
    return dataclasses.replace(part, position_ids_BT=positions_BT3 - first_BT3[..., :1])


class MropeCpPositions(ReferenceEngine):
    name = "mutant.mrope-cp-positions"
    bug = "mrope-cp-positions"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen2_5_vl"}))
    pipeline = dataclasses.replace(REFERENCE, shard=shard_with_local_mrope)
