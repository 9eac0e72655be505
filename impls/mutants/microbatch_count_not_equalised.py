"""mutant.microbatch-count-not-equalised: under a token budget each data-parallel rank runs the micro-batches its own
cut needs, without agreeing on their number with the other ranks.

Where it happened: verl #6176 and #6178 (dynamic batch size, `use_dynamic_bsz` with `ppo_max_token_len_per_gpu`: the
micro-batch count was not all-reduced over the data-parallel group), EasyR1 #11004, slime PR #1860. A rank holding
ten times fewer tokens than another cuts fewer micro-batches and leaves its loop while the other is still in a
micro-step; under FSDP each micro-step's forward all-gathers the parameters, so the rank that left waits in the step's
next collective while its peer waits in an all-gather: the step hangs.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import REFERENCE


def own_micro_steps(local_steps: int, mesh: Mesh) -> int:
    return local_steps  # the bug: no MAX over the data-parallel group, so no empty micro-batches on the rank that needs fewer


class MicrobatchCountNotEqualised(ReferenceEngine):
    name = "mutant.microbatch-count-not-equalised"
    bug = "microbatch-count-not-equalised"
    pipeline = replace(REFERENCE, micro_steps=own_micro_steps)
