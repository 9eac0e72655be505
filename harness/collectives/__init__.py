"""Per-rank collective recorder: what each rank issued, for symmetry checks and hang diagnosis.

    recorder = install_recorder()        # before the engine is imported
    recorder.start_case()
    ...                                  # the engine runs; every collective is logged (dist.*, DTensor's functional ones)
    log = recorder.snapshot()            # list of JSON-serialisable dicts, one per call
    first_divergence([log_rank0, log_rank1, ...])   # None, or where the ranks stopped matching
    unused_mesh(plan, layers, logs)      # the ways the logs show a dp x cp arm did not run distributed
"""

from packcheck.harness.collectives.mesh_use import unused_mesh
from packcheck.harness.collectives.ops import OPS, describe, describe_state
from packcheck.harness.collectives.recorder import CollectiveRecorder, install_recorder
from packcheck.harness.collectives.symmetry import divergence, first_divergence, group_sequences, signature

__all__ = [
    "OPS", "CollectiveRecorder", "describe", "describe_state", "divergence", "first_divergence",
    "group_sequences", "install_recorder", "signature", "unused_mesh",
]
