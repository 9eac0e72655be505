"""One case run through a kernel or the per-document math: the inputs rounded to the dtype, the forward, and (where
asked) the backward of sum(output x weight), the weights rounded to the dtype too. What comes back is every output and
every input's gradient (`d` + its name: dq, dk, dv, dg, dbeta, dx, dweight) in float64 on the CPU.

The oracle takes the same rounded inputs in float64, so their rounding is no part of any kernel's error.
"""

from __future__ import annotations

from typing import Callable

import torch

from packcheck.harness.kernels.inputs import Inputs
from packcheck.harness.kernels.oracles import Packing

KernelCall = Callable[[dict, Packing], dict]  # inputs by name -> outputs by name (registry.py, oracles.py)


def rounded(inputs: Inputs, dtype: torch.dtype) -> Inputs:
    """The inputs as the dtype holds them, back in float64."""
    return Inputs({n: t.to(dtype).double() for n, t in inputs.tensors.items()}, {n: t.to(dtype).double() for n, t in inputs.weights.items()})


def evaluate(call: KernelCall, inputs: Inputs, packing: Packing, dtype: torch.dtype, device: str, backward: bool) -> dict[str, torch.Tensor]:
    leaves = {n: t.to(device=device, dtype=dtype).requires_grad_(backward) for n, t in inputs.tensors.items()}
    outputs = call(dict(leaves), packing)
    missing = set(inputs.weights) - set(outputs)
    assert not missing, f"the kernel returned no {', '.join(sorted(missing))}"
    got = {n: outputs[n].detach().double().cpu() for n in inputs.weights}
    if backward:
        names = list(inputs.weights)
        grads = torch.autograd.grad([outputs[n] for n in names], list(leaves.values()),
                                    grad_outputs=[inputs.weights[n].to(device=device, dtype=outputs[n].dtype) for n in names],
                                    allow_unused=True)
        got |= {f"d{n}": (torch.zeros_like(t) if g is None else g).detach().double().cpu()
                for (n, t), g in zip(leaves.items(), grads)}
    return got
