"""The allowed error of a low-precision computation against its float64 (or higher-precision) oracle, judged by what a
correct computation in the same precision errs by on the same values (flash-attention's own test style; DESIGN.md,
"Oracles and tolerances"):

    allowed = max(K x error of the same-precision reference,  ULPS x error of rounding the oracle to the dtype)

Two users: `packcheck kernels` (the same-precision reference is the per-document math in the kernel's dtype) and the
guard (the same model run per document in the training dtype). K is measured, not guessed: docs/kernels.md ("Choosing
K") gives the distribution of kernel error / reference error over correct kernels. float64 is judged by the float64
table (harness/compare/tolerances.py). The returned Bound says which term set the threshold.

A gradient can be exactly zero where a computation's is not: a 1-token causal document's dq and dk are 0 (its softmax is
1 whatever the score), and a GPU kernel that forms them as P x (dP - D) in float32 returns rounding noise (~1e-7 of the
other gradients). Relative to zero any error is infinite, so a gradient's error is measured against max(its own norm,
`scale`): the case's whole gradient (every tensor's, concatenated) shrunk to this tensor's size (`gradient_scales`).
Where that scale binds, the rounding term is the dtype's unit roundoff at that scale: an error that small relative to
the gradient the optimizer sees is no error. A wrong gradient of ordinary size is measured against its own norm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.comparison import Arms, Comparison
from packcheck.harness.compare.metrics import rel_l2
from packcheck.harness.compare.tolerances import TOLERANCES

K = 4.0  # docs/kernels.md, "Choosing K"
ULPS = 2.0  # an output rounded once is within half a spacing; 2 leaves room for a kernel that rounds in two steps


def gradient_scales(grads: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Each gradient's `scale` (above): the norm of every gradient of the case together, times sqrt(this tensor's share
    of their elements)."""
    total = sum(t.numel() for t in grads.values())
    whole = sum(torch.linalg.vector_norm(t.flatten(), dtype=torch.float64).item() ** 2 for t in grads.values()) ** 0.5
    return {n: whole * (t.numel() / total) ** 0.5 for n, t in grads.items()}


def relative(got: torch.Tensor, oracle: torch.Tensor, scale: float = 0.0) -> float:
    """||got - oracle|| / max(||oracle||, scale): rel_l2 where the oracle is no smaller than `scale`."""
    if torch.linalg.vector_norm(oracle.flatten()).item() >= scale:
        return rel_l2(got, oracle)
    return torch.linalg.vector_norm((got - oracle).flatten()).item() / scale


def allowed(name: str, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype, scale: float = 0.0,
            field: str = "rel_l2", reference_is: str = "per-document reference") -> tuple[float, Bound]:
    """The threshold of output `name` and the term that set it (`field`: the bound's name in reports)."""
    if dtype == torch.float64:
        return TOLERANCES["float64"].grad, Bound(field="grad", source=Source.TABLE)
    short = str(dtype).removeprefix("torch.")
    own = relative(reference, oracle, scale)
    if torch.linalg.vector_norm(oracle.flatten()).item() < scale:
        roundoff = torch.finfo(dtype).eps / 2
        if K * own < ULPS * roundoff:
            return ULPS * roundoff, Bound(field=field, source=Source.ROUNDING,
                                          term=f"{ULPS:g} x {short} unit roundoff {roundoff:.3g} at the case's gradient scale ({name} is smaller)")
    rounding = rel_l2(oracle.to(dtype), oracle)
    if K * own >= ULPS * rounding:
        return K * own, Bound(field=field, source=Source.GOLDEN_FLOOR, floor=own,
                              term=f"{K:g} x the {short} {reference_is}'s own error {own:.3g}")
    return ULPS * rounding, Bound(field=field, source=Source.ROUNDING, term=f"{ULPS:g} x {short} rounding of {name}: {rounding:.3g}")


def compared(arms: Arms, quantity: str, got: torch.Tensor, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype, *,
             item: str = "", scale: float = 0.0, field: str = "rel_l2", reference_is: str = "per-document reference",
             where: str = "") -> Comparison:
    """`got` against the oracle by this rule, as a Comparison (relative L2, in float64 on the oracle's device; a NaN error
    reads as inf: never a pass, and it sorts as the worst)."""
    got, reference, oracle = (t.detach().to(oracle.device).double() for t in (got, reference, oracle))
    threshold, bound = allowed(quantity, reference, oracle, dtype, scale, field, reference_is)
    observed = relative(got, oracle, scale)
    return Comparison(arms=arms, quantity=quantity, item=item, metric="rel_l2", observed=math.inf if math.isnan(observed) else observed,
                      threshold=threshold, where=where, bound=bound)
