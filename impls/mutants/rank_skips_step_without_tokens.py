"""mutant.rank-skips-step-without-tokens: a data-parallel rank whose micro-batches hold no loss
token returns early from the step, skipping its forward, backward and every collective in them.

A common "nothing to train here" shortcut. Under data parallelism the other ranks then wait in
the gradient all-reduce for a rank that never comes: the job hangs (after an NCCL timeout of 30
minutes by default). packcheck's watchdog must turn it into a per-rank hang report.
"""

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh


class RankSkipsStepWithoutTokens(ReferenceEngine):
    name = "mutant.rank-skips-step-without-tokens"
    bug = "rank-skips-step-without-tokens"

    def train(self, case: Case, mesh: Mesh):
        mine = [i for micro_batch in case.partition.per_rank[mesh.dp_rank] for i in micro_batch]
        if not any(case.samples[i].num_targets for i in mine):
            return None  # the bug: this rank leaves the step the others are about to sync on
        return super().train(case, mesh)
