"""Compare the MoE router reports of two arms: the aux loss within the loss tolerance, the tokens
per expert as the fraction of routing assignments that moved to another expert: none in float64
(routing is a discrete choice: the same tokens under the same weights pick the same experts however
they are packed, cut or sharded); in lower precision a near-tie may flip (Tolerance.router_reassigned)."""

from __future__ import annotations

from packcheck.harness.compare.comparison import Arms, Comparison
from packcheck.harness.compare.metrics import rel
from packcheck.harness.compare.tolerances import Tolerance
from packcheck.harness.contract import StepResult


def compare_router(arms: Arms, observed: StepResult, reference: StepResult, tol: Tolerance) -> list[Comparison]:
    """The router quantities both arms report (none when either leaves them out)."""
    rows = []
    if observed.aux_loss is not None and reference.aux_loss is not None:
        rows.append(Comparison(arms=arms, quantity="aux_loss", item="", metric="rel", observed=rel(observed.aux_loss, reference.aux_loss),
                               **tol.by("loss"), where=f"{observed.aux_loss:.12g} vs {reference.aux_loss:.12g}"))
    a, b = observed.router_tokens_per_expert, reference.router_tokens_per_expert
    if a is not None and b is not None:
        if a.shape != b.shape:
            rows.append(Comparison(arms=arms, quantity="router_tokens_per_expert", item="", metric="shape", observed=float("inf"),
                                   threshold=0.0, where=f"shape {tuple(a.shape)} vs {tuple(b.shape)}"))
            return rows
        diff_LE = (a.long() - b.long()).abs()
        where = f"{int(diff_LE.sum())} assignments differ" if diff_LE.any() else f"{int(b.sum())} assignments, identical"
        if diff_LE.any():
            layer, expert = (int(i) for i in divmod(int(diff_LE.argmax()), b.shape[1]))
            where += f"; worst layer {layer} expert {expert}: {int(a[layer, expert])} vs {int(b[layer, expert])}"
        moved = float(diff_LE.sum()) / 2 / max(int(b.sum()), 1)  # a reassignment leaves one expert and joins another
        rows.append(Comparison(arms=arms, quantity="router_tokens_per_expert", item="", metric="reassigned", observed=moved,
                               **tol.by("router_reassigned"), where=where))
    return rows
