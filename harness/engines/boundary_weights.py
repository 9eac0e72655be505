"""A warning, never a problem: a packed result whose `dloss_dlogprobs` leaves entry 0 empty at every document
boundary while its loss holds weight that no reported entry carries.

Entry 0 of a sample's `dloss_dlogprobs` is the weight of the prediction of its token 0 from whatever precedes it in
the row (docs/contract.md): 0 for a correct engine, non-zero for one that trains a label across the boundary. An
adapter that fills only entries 1 onward hides that bug from mask_alignment's supervised set, which then blames
something else. A correct engine's weights are 0 there too, so the empty entries alone say nothing; for the SFT
token-mean loss, which is linear in the log-probs, the reported loss also equals sum(w * logprobs) over the reported
entries, and a gap that the reported weights cannot explain is the sign that some weight went unreported.
"""

from __future__ import annotations

from packcheck.harness.contract import Case, LayoutKind, LossKind, StepResult
from packcheck.harness.contract.rows import layout_rows

# relative gap between the reported loss and sum(w * logprobs) beyond each dtype's rounding of a loss
GAP = {"float64": 1e-8, "float32": 1e-4, "bfloat16": 2e-2}


def boundary_samples(case: Case) -> list[int]:
    """The samples that do not start their packed row: token 0 of each is predicted from the row's earlier tokens."""
    if case.layout.kind is not LayoutKind.PACKED:
        return []
    return [sample for row in layout_rows(case) for sample, start in zip(row.samples, row.starts(case)) if start > 0]


def boundary_warning(case: Case, result: StepResult) -> str | None:
    """The warning's sentence where the result earns it (a valid result: harness/engines/validate.py), else None."""
    weights = result.dloss_dlogprobs
    if weights is None or case.loss.kind is not LossKind.SFT_TOKEN_MEAN:
        return None
    boundaries = boundary_samples(case)
    if not boundaries or any(float(weights[i][0]) != 0.0 for i in boundaries):
        return None
    implied = sum(float((w.double() * lp.double()).sum()) for w, lp in zip(weights, result.logprobs))
    gap = abs(result.loss - implied)
    if gap <= GAP.get(case.dtype, GAP["bfloat16"]) * max(abs(result.loss), 1e-12):
        return None
    return (f"dloss_dlogprobs entry 0 is 0 at all {len(boundaries)} document boundaries of this packed case, yet the reported loss "
            f"({result.loss:.6g}) is not sum(dloss_dlogprobs * logprobs) ({implied:.6g}): some weight in the loss is reported "
            "nowhere. If the engine trains a label across a boundary, its weight belongs in entry 0 of the sample whose token 0 "
            "it predicts (docs/contract.md, dloss_dlogprobs); filled there, mask_alignment names that bug")
