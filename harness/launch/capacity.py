"""What this machine can host: a launch puts each rank of a CUDA case on its own GPU.

Asked before a launch starts, so an arm that needs more GPUs than the machine has is declined by
the machine (a named reason, the arm skipped or the verdict unsupported) instead of starting ranks
that die on a device ordinal that does not exist.
"""

from __future__ import annotations

import os

from packcheck.harness.contract import Case

# How many GPUs packcheck may use, instead of torch.cuda.device_count(): lets the tests of a CPU machine
# plan a run for a machine with N GPUs (docs/gpu.md, "Every arm on any machine").
VISIBLE_GPUS_ENV = "PACKCHECK_VISIBLE_GPUS"


def visible_gpus() -> int:
    """The GPUs a launch may put ranks on: PACKCHECK_VISIBLE_GPUS where set, else torch's count."""
    override = os.environ.get(VISIBLE_GPUS_ENV, "").strip()
    if override:
        if not override.isdigit():
            raise ValueError(f"{VISIBLE_GPUS_ENV}={override!r}: give a number of GPUs (0 or more), or unset it")
        return int(override)
    import torch

    return torch.cuda.device_count()


def cannot_host(case: Case) -> str | None:
    """Why this machine cannot run `case`'s ranks, or None."""
    if case.device != "cuda":
        return None
    gpus = visible_gpus()
    if case.parallel.world_size > gpus:
        return f"{case.parallel.describe()} on cuda needs {case.parallel.world_size} GPU{'s' if case.parallel.world_size > 1 else ''} (one per rank); this machine has {gpus}"
    return None
