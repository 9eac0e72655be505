"""Leave the user's run as it was: everything a check could change, saved before it and put back after it, bit for bit.

A check never steps an optimizer and never draws from the data loader, so the weights, the optimizer's state and the
data order are not touched. What its own forwards and backwards do touch is put back: every parameter's `.grad` (the
tensors themselves: a gradient accumulating over micro-batches goes on from the very tensor it was), every buffer (a
rotary cache, running statistics), the module's train/eval mode, and the random generators (Python's, NumPy's,
torch's on the CPU and on every CUDA device), so the step after the check draws its dropout from where it would have.
tests/test_guard.py proves it on a Trainer run, guard on against guard off.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn


@contextmanager
def untouched(model: nn.Module) -> Iterator[None]:
    grads = {name: p.grad for name, p in model.named_parameters()}
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    training = {name: m.training for name, m in model.named_modules()}
    generators = _generators()
    for p in model.parameters():
        p.grad = None
    try:
        yield
    finally:
        for name, p in model.named_parameters():
            p.grad = grads.get(name)
        with torch.no_grad():
            for name, b in model.named_buffers():
                if name in buffers and b.shape == buffers[name].shape:
                    b.copy_(buffers[name])
        for name, m in model.named_modules():
            m.training = training.get(name, m.training)
        _restore(generators)


def _generators() -> dict:
    saved = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        saved["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy
        saved["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return saved


def _restore(saved: dict) -> None:
    random.setstate(saved["python"])
    torch.set_rng_state(saved["torch"])
    if "cuda" in saved:
        torch.cuda.set_rng_state_all(saved["cuda"])
    if "numpy" in saved:
        import numpy
        numpy.random.set_state(saved["numpy"])
