"""mutant.cp-uneven-shards: rows are not padded to a multiple of cp before sharding.

Where it happened: DeepSpeed #5177. With a sequence length that cp does not divide, the shards
have different lengths: the all-to-all (or the ring exchange) sizes disagree across ranks, which
errors out, hangs, or silently mixes up tokens. A correct engine pads (or refuses with a clear
error); packcheck must turn whatever happens into a verdict.
"""

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def width_unchanged(width: int, cp: int) -> int:
    return width  # the bug: no padding segment to a multiple of cp


class CpUnevenShards(ReferenceEngine):
    name = "mutant.cp-uneven-shards"
    bug = "cp-uneven-shards"
    pipeline = replace(REFERENCE, padded_width=width_unchanged)
