"""mutant.pad-logits-mask-multiply: the loss masked by multiplication, so a NaN at a pad position reaches it.

Where it happened: Megatron-Bridge PR #3117 (NVIDIA-NeMo/Megatron-Bridge): under context parallelism
`pad_seq_to_mult` adds padding with loss_mask = 0; where the model produced NaN/Inf at those positions,
`(losses * loss_mask).sum()` was NaN (IEEE 754: NaN x 0 = NaN) and poisoned the total loss. The fix selects with
torch.where before the sum. Here the reference's `loss_sum` step multiplies by the mask instead: with finite logits at
every pad (every ordinary case) it is exact, so only a case that poisons its pads (Case.pad_poison) shows it.
"""

from dataclasses import replace

import torch

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def loss_sum_by_multiplication(values_BT: torch.Tensor, mask_BT: torch.Tensor) -> torch.Tensor:
    return (values_BT * mask_BT.to(values_BT)).sum()  # the bug: NaN x 0 = NaN at a pad position


class PadLogitsMaskMultiply(ReferenceEngine):
    name = "mutant.pad-logits-mask-multiply"
    bug = "pad-logits-mask-multiply"
    pipeline = replace(REFERENCE, loss_sum=loss_sum_by_multiplication)
