"""What this machine can host: a launch puts each rank of a CUDA case on its own GPU.

Asked before a launch starts, so an arm that needs more GPUs than the machine has is declined by
the machine (a named reason, the arm skipped or the verdict unsupported) instead of starting ranks
that die on a device ordinal that does not exist.
"""

from __future__ import annotations

from packcheck.harness.contract import Case


def cannot_host(case: Case) -> str | None:
    """Why this machine cannot run `case`'s ranks, or None."""
    if case.device != "cuda":
        return None
    import torch

    gpus = torch.cuda.device_count()
    if case.parallel.world_size > gpus:
        return f"{case.parallel.describe()} on cuda needs {case.parallel.world_size} GPU{'s' if case.parallel.world_size > 1 else ''} (one per rank); this machine has {gpus}"
    return None
