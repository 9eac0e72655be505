"""mutant.local-seq-lens-under-cp: document boundaries recomputed per shard under CP.

Where it happened: prime-rl's seq_lens contract PR (boundaries had only local semantics under
CP). Each shard rebuilds positions and segment ids as if it were a row of its own, so a document
that straddles the shard cut becomes two documents: its second half restarts at position 0 and
cannot attend to its first half.
"""

import dataclasses

import torch

from dataclasses import replace

from packcheck.impls.reference.data.predictions import Predictions
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE

SHARD_ID_STRIDE = 1 << 20  # segment ids of different shards never coincide


def shard_with_local_boundaries(predictions: Predictions, mesh: Mesh) -> Predictions:
    part = predictions.shard(mesh.cp_rank, mesh.cp)
    segments = part.segment_ids_BT
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]  # the bug: the shard start is a document start
    index = torch.arange(segments.shape[1]).expand_as(segments)
    run_start = torch.where(starts, index, 0).cummax(dim=1).values
    return dataclasses.replace(part, position_ids_BT=index - run_start,
                               segment_ids_BT=starts.cumsum(dim=1) + mesh.cp_rank * SHARD_ID_STRIDE)


class LocalSeqLensUnderCp(ReferenceEngine):
    name = "mutant.local-seq-lens-under-cp"
    bug = "local-seq-lens-under-cp"
    pipeline = replace(REFERENCE, shard=shard_with_local_boundaries)
