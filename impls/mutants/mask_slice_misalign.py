"""mutant.mask-slice-misalign: unpadding takes the loss mask from the wrong end of a padded row.

Where it happened: the verl Bumblebee engine review (`full_mask[-n:] = row_mask[:n]`); NeMo
Automodel PR #2314. Right-padded rows come out right; left-padded rows train on the padding
end of the mask, shifted by the pad length.
"""

import torch

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE


def unpad_mask_sliced_from_start(row_mask_L: torch.Tensor, row_valid_L: torch.Tensor) -> torch.Tensor:
    n = int(row_valid_L.sum())
    full_mask = torch.zeros(n, dtype=row_mask_L.dtype)
    full_mask[-n:] = row_mask_L[:n]  # the bug: assumes the valid tokens sit at the start of the row
    return full_mask


class MaskSliceMisalign(ReferenceEngine):
    name = "mutant.mask-slice-misalign"
    bug = "mask-slice-misalign"
    pipeline = replace(REFERENCE, unpad_mask=unpad_mask_sliced_from_start)
