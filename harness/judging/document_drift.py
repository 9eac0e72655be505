"""Where log-prob drift sits in a packed row: in the first document of each row, or in later ones.

Cross-document leaks leave the first document of a row exact and move the ones after it; this is
the signature the diagnoses look for.
"""

from __future__ import annotations

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.contract.rows import layout_rows


def drift_by_document(packed_case: Case, observed: StepResult, reference: StepResult) -> tuple[float, float]:
    """(worst error over first-in-row documents, worst error over later documents)."""
    first = later = 0.0
    for row in layout_rows(packed_case):
        for position, i in enumerate(row.samples):
            diff = (observed.logprobs[i].double() - reference.logprobs[i].double()).abs().max().item()
            if position == 0:
                first = max(first, diff)
            else:
                later = max(later, diff)
    return first, later
