"""mutant.verl-cp-undercount: under context parallelism each rank counts only its shard's tokens.

Where it happened: verl #5983. The count is taken after the sequence is sharded and reduced over
the data-parallel group only, so it is about cp times too small and the token-mean loss about cp
times too large.
"""

import torch

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def count_local_shard(micro_tokens: list[int], shard_tokens: int, mesh: Mesh) -> int:
    return int(mesh.all_reduce(torch.tensor([shard_tokens], dtype=torch.float64), "dp").item())  # the bug: shard, not row


class VerlCpUndercount(ReferenceEngine):
    name = "mutant.verl-cp-undercount"
    bug = "verl-cp-undercount"
    pipeline = replace(REFERENCE, global_token_count=count_local_shard)
