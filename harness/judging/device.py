"""Where a judge computes: on a run that uses a GPU, the gradients of a large model are compared there, not on the host."""

from __future__ import annotations

import torch

from packcheck.harness.compare.metrics import LARGE_ON_HOST
from packcheck.harness.judging.judgement import Judgement


def judging_device(j: Judgement) -> torch.device:
    """Where the judge computes: where the gradients are (the GPU on a CUDA run, even for the results kept on the host
    beyond the harness's share of it: each of their tensors comes to the GPU once), or the GPU if the process uses one
    and the gradients are large (metrics.LARGE_ON_HOST); else the CPU, as a CPU run always did (it never initialises
    CUDA). At 8B a float64 pass over the parameters on the host takes seconds, on an H200 tens of milliseconds."""
    if j.device.type == "cuda" or not torch.cuda.is_initialized():
        return j.device
    large = any(g.numel() >= LARGE_ON_HOST for r in j.results.values() for g in r.grads.values())
    return torch.device("cuda", torch.cuda.current_device()) if large else j.device
