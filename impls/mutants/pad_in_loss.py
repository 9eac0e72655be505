"""mutant.pad-in-loss: padding tokens are loss targets.

Where it happened: verl #3805 (a response with no EOS / padding counted in the loss). The target
mask is taken from the attention mask's complement of nothing: every token after the first of a
row, padding included, except where the loss mask of a document says 0.
"""

from dataclasses import replace

from packcheck.impls.reference.data.collate import Document
from packcheck.impls.reference.data.rows import RowPlan
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def target_mask_with_padding(plan: RowPlan) -> list[int]:
    mask: list[int] = []
    for segment in plan.segments():
        mask += segment.loss_mask.tolist() if isinstance(segment, Document) else [1] * segment  # the bug: pads are targets
    mask[0] = 0
    return mask


class PadInLoss(ReferenceEngine):
    name = "mutant.pad-in-loss"
    bug = "pad-in-loss"
    pipeline = replace(REFERENCE, target_mask=target_mask_with_padding)
