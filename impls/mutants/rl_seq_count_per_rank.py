"""mutant.rl-seq-count-per-rank: the sequence count G of the seq-mean modes is this DP rank's own.

Where it happens: any engine that divides per-sequence sums by the number of sequences in its
local mini-batch (`loss_mask.shape[0]`, or a count never all-reduced) and then averages gradients
over DP ranks: exact when every rank holds as many sequences, wrong as soon as ranks are uneven
(dynamic batching, a last partial batch, the fully masked sample landing on one rank). verl's
agg_loss takes `global_batch_size` and `dp_size` for exactly this reason. Single-process runs
cannot see it; token-mean is untouched.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def local_sequence_count(local_sequences: int, mesh: Mesh) -> int:
    return local_sequences  # the bug: never all-reduced over the data-parallel group


class RlSeqCountPerRank(ReferenceEngine):
    name = "mutant.rl-seq-count-per-rank"
    bug = "rl-seq-count-per-rank"
    pipeline = replace(REFERENCE, global_sequence_count=local_sequence_count)
