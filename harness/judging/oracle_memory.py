"""Whether the float64 reference, the oracle of gradient_oracle and oracle_agreement, fits the device it runs on.

    reason = oracle_memory_reason(setting)     # None, or why those scenarios are unsupported at this --model

The oracle runs the run's own model in float64 on the case's device (judging/oracle_arms.py: the GPU in a cuda run,
else the CPU): its weights and its gradients, and the harness's copy of those gradients, 8 bytes a parameter each
(activations left out: the reference checkpoints its layers when they would not fit, impls/reference/step/memory_plan.py).
At 0.6b that is 18 GB; at 8B 193 GB, more than an H200 (150.8 GB) and more than its machine's 128 GiB of host memory.
The engine's own arms are judged there by the other scenarios; the absolute check stays at a size whose oracle fits.
"""

from __future__ import annotations

import os

import torch

from packcheck.harness.judging.judgement import Setting
from packcheck.harness.models.checkpoint import parameter_count

COPIES = 3  # weights, gradients, the harness's copy of the gradients


def host_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_bytes(device: str) -> tuple[str, int]:
    """(what the oracle runs on, its memory): the first GPU in a cuda run where one is visible, else the host."""
    if device == "cuda" and torch.cuda.is_available():
        return "GPU", torch.cuda.get_device_properties(0).total_memory
    return "host", host_bytes()


def oracle_memory_reason(setting: Setting) -> str | None:
    params = parameter_count(setting.model.checkpoint)
    where, have = device_bytes(setting.device)
    need = COPIES * 8 * params
    if need <= have:
        return None
    return (f"its oracle is the float64 reference on the case's device, which needs about {need / 1e9:.0f} GB at --model "
            f"{setting.model_name} ({params:,} parameters: weights, gradients and the harness's copy, 8 bytes each); the "
            f"{where} has {have / 1e9:.0f} GB: run it at a --model whose float64 copy fits (0.6b: {COPIES * 8 * 0.752:.0f} GB)")
