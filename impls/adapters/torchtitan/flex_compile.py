"""How the adapter compiles torchtitan's flex attention: torchtitan's own inductor options without its autotuning.

torchtitan 0.3.0 compiles `flex_attention` once, as the class attribute `FlexAttention._compiled_flex_attn`,
with `max_autotune` and `coordinate_descent_tuning` on: every new shape benchmarks candidate Triton
configurations for the forward and the backward kernel. A conformance Case has many shapes (every unpacked
sequence, every micro-batch of its own width) and every arm runs in a fresh process, so on an H200 a
single cell did not finish in 165 s (docs/gpu.md). Autotuning chooses tile sizes, warps and stages: the same
document mask, the same online softmax, summed in another tile order. So the adapter recompiles it with
torchtitan's options minus those two; the kernel is still torchtitan's compiled flex kernel under the block
mask torchtitan builds. `PACKCHECK_TORCHTITAN_AUTOTUNE=1` keeps torchtitan's options as they are (for a
run that should also cover the autotuned tile choice, at minutes per shape).
"""

from __future__ import annotations

import os

AUTOTUNE_VARIABLE = "PACKCHECK_TORCHTITAN_AUTOTUNE"
AUTOTUNING_OPTIONS = ("max_autotune", "coordinate_descent_tuning")


def without_autotuning(options: dict) -> dict:
    """`options` with the autotuning ones off, every other one as given."""
    return {**options, **{name: False for name in AUTOTUNING_OPTIONS if name in options}}


def compile_flex_without_autotuning() -> bool:
    """Recompile torchtitan's class-wide flex attention without autotuning (idempotent); False where the
    variable asks to keep torchtitan's own compile."""
    if os.environ.get(AUTOTUNE_VARIABLE) == "1":
        return False
    import torch
    from torch.nn.attention.flex_attention import flex_attention
    from torchtitan.models.common.attention import FlexAttention

    if getattr(FlexAttention, "packcheck_compiled_without_autotuning", False):
        return True
    FlexAttention._compiled_flex_attn = torch.compile(flex_attention, options=without_autotuning(FlexAttention.inductor_configs))
    FlexAttention.packcheck_compiled_without_autotuning = True
    return True
