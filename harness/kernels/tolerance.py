"""The allowed error of one kernel output against the float64 oracle (relative L2 over the whole tensor): the
same-precision rule (harness/compare/same_precision.py) with the per-document math in the kernel's dtype as the
reference. Each comparison says which term bound it.
"""

from __future__ import annotations

import torch

from packcheck.harness.compare import Comparison
from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.compare.comparison import Arms
from packcheck.harness.compare.same_precision import compared

FIELD = "kernel_rel_l2"


def compare(kernel: str, name: str, got: torch.Tensor, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype,
            where: str = "", scale: float = 0.0) -> Comparison:
    return compared(Arms(ArmId(kernel), ArmId(kernel, role=Role.ORACLE)), name, got, reference, oracle, dtype, scale=scale,
                    field=FIELD, where=where)
