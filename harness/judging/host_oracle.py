"""Whether the float64 reference on the CPU, the oracle of gradient_oracle and oracle_agreement, fits this host.

    reason = host_oracle_reason(setting)     # None, or why those scenarios are unsupported at this --model

The oracle runs the run's own model in float64 on the CPU: its weights and its gradients, and the harness's copy of
those gradients, 8 bytes a parameter each (activations left out: the reference checkpoints its layers when they would
not fit, impls/reference/step/memory_plan.py). At 0.6b that is 18 GB; at 8B 193 GB, more than the H200 machine's
128 GiB, and a float64 step of 8B parameters on its 16 cores would take about a quarter of an hour per arm. The
engine's own arms are judged there by the other scenarios; the absolute check stays at a size whose oracle fits.
"""

from __future__ import annotations

import os

from packcheck.harness.judging.judgement import Setting
from packcheck.harness.models.checkpoint import parameter_count

COPIES = 3  # weights, gradients, the harness's copy of the gradients


def host_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def host_oracle_reason(setting: Setting) -> str | None:
    params = parameter_count(setting.model.checkpoint)
    need, have = COPIES * 8 * params, host_bytes()
    if need <= have:
        return None
    return (f"its oracle is the float64 reference on the CPU, which needs about {need / 1e9:.0f} GB of host memory at --model "
            f"{setting.model_name} ({params:,} parameters: weights, gradients and the harness's copy, 8 bytes each); this "
            f"machine has {have / 1e9:.0f} GB: run it at a --model whose float64 copy fits (0.6b: {COPIES * 8 * 0.752:.0f} GB)")
