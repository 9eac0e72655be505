"""Whether this torch can run torchtitan 0.3.0 at all: what it needs from torch that torch 2.11 lacks.

Seen on the H200 (torch 2.11.0+cu130, 2026-12-01; docs/gpu.md): `import torchtitan.trainer` and
`torchtitan.models.llama3` fail on `from torch.distributed.fsdp import DataParallelMeshDims`; with
that name stood in for, torchtitan's flex document mask then fails in `create_block_mask(...,
separate_full_blocks=...)`, a keyword torch 2.11's flex attention does not take. The mask is the
thing under test, so nothing is bridged: on such a torch every case is unsupported with this reason.
torch 2.13 (this project's CPU pin) has both.
"""

from __future__ import annotations

import inspect


def torch_gap() -> str | None:
    """Why this torch cannot run torchtitan 0.3.0's step, or None."""
    import torch
    import torch.distributed.fsdp as fsdp
    from torch.nn.attention.flex_attention import create_block_mask

    missing = []
    if not hasattr(fsdp, "DataParallelMeshDims"):
        missing.append("torch.distributed.fsdp.DataParallelMeshDims (imported by torchtitan.trainer and its llama3 model)")
    if "separate_full_blocks" not in inspect.signature(create_block_mask).parameters:
        missing.append("create_block_mask(separate_full_blocks=...) (torchtitan's flex document mask)")
    if not missing:
        return None
    return (f"torchtitan 0.3.0 needs a newer torch than {torch.__version__}: it lacks " + " and ".join(missing)
            + "; torchtitan 0.2.2 is the newest release that imports on torch 2.11 (a different API: documents split at EOS tokens)")
