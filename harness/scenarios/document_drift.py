"""Where log-prob drift sits in a packed row: in the first document of each row, or in later ones.

Cross-document leaks leave the first document of a row exact and move the ones after it; this is
the signature the diagnoses look for.
"""

from __future__ import annotations

from harness.contract import Case, StepResult
from harness.data.packing import pack_in_order


def drift_by_document(packed_case: Case, observed: StepResult, reference: StepResult) -> tuple[float, float]:
    """(worst error over first-in-row documents, worst error over later documents)."""
    first = later = 0.0
    for micro_batch in (mb for rank in packed_case.partition.per_rank for mb in rank):
        rows = pack_in_order([len(packed_case.samples[i].input_ids) for i in micro_batch], packed_case.layout.seq_len)
        for row in rows:
            for position, j in enumerate(row):
                i = micro_batch[j]
                diff = (observed.logprobs[i].double() - reference.logprobs[i].double()).abs().max().item()
                if position == 0:
                    first = max(first, diff)
                else:
                    later = max(later, diff)
    return first, later
