"""mutant.boundary-label: the last token of document A is trained to predict document B's first.

Where it happened: transformers PR #31629 review, trl PR #3526. The labels of a packed row are
the row shifted by one with only prompts masked, so the first token of every document that
follows another one becomes a target: one extra loss term and one extra counted token per
boundary.
"""

from dataclasses import replace

from packcheck.impls.reference.data.collate import Document
from packcheck.impls.reference.data.rows import RowPlan, target_mask


def target_mask_across_boundaries(plan: RowPlan) -> list[int]:
    mask = target_mask(plan)
    offset, previous_was_document = 0, False
    for segment in plan.segments():
        is_document = isinstance(segment, Document)
        if is_document and previous_was_document:
            mask[offset] = 1  # the bug: no ignore-index at the document boundary
        offset += len(segment) if is_document else segment
        previous_was_document = is_document
    return mask


from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.step.pipeline import REFERENCE  # noqa: E402


class BoundaryLabel(ReferenceEngine):
    name = "mutant.boundary-label"
    bug = "boundary-label"
    pipeline = replace(REFERENCE, target_mask=target_mask_across_boundaries)
