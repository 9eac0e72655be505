"""Whether this process can compute on a case's device: the one check an engine (or a benchmark) makes before it
puts anything on 'cuda'. It asks torch, in the process that computes; the harness plans its launches with
harness/launch/capacity.py instead, whose count a test may override."""

from __future__ import annotations


def device_missing(device: str) -> str | None:
    """Why `device` cannot be used here ('cuda' asked, torch sees no CUDA device), or None."""
    if device != "cuda":
        return None
    import torch

    return None if torch.cuda.is_available() else "torch sees no CUDA device"
