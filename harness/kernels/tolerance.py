"""The allowed error of one kernel output against the float64 oracle (relative L2 over the whole tensor), in the style
of flash-attention's own tests and DESIGN.md, "Oracles and tolerances":

    allowed = max(K x error of the same-precision reference,  ULPS x error of rounding the oracle to the dtype)

The same-precision reference is the per-document math (oracles.py) run in the kernel's dtype: what a correct
computation in that dtype errs by on these very values. The second term is the dtype's rounding at the values compared:
no kernel returns its output more exactly than rounded once, and it bounds outputs the reference happens to compute
exactly (a 1-token document's output is its value row). K is measured, not guessed: docs/kernels.md ("Choosing K") gives
the distribution of kernel error / reference error over the correct kernels this project runs and why K sits where it
does. float64 kernels are judged by the float64 table (harness/compare/tolerances.py). Each comparison says which term
bound it.

A gradient can be exactly zero where a kernel's is not: a 1-token causal document's dq and dk are 0 (its softmax is 1
whatever the score), and a GPU kernel that forms them as P x (dP - D) in float32 returns rounding noise (~1e-7 of the
other gradients). Relative to zero any error is infinite, so each gradient's error is measured against
max(its own norm, `scale`): the case's whole gradient (every input's, concatenated) shrunk to this tensor's size. Where
that scale binds, the rounding term is the dtype's unit roundoff at that scale: a kernel's error that small relative to
the gradient the optimizer sees is no error. A wrong gradient of ordinary size is measured against its own norm as before.
"""

from __future__ import annotations

import torch

from packcheck.harness.compare import Comparison
from packcheck.harness.compare.arm_id import ArmId, Role
from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.comparison import Arms
from packcheck.harness.compare.metrics import rel_l2
from packcheck.harness.compare.tolerances import TOLERANCES

K = 4.0  # docs/kernels.md, "Choosing K"
ULPS = 2.0  # an output rounded once is within half a spacing; 2 leaves room for a kernel that rounds in two steps
FIELD = "kernel_rel_l2"


def gradient_scales(oracle: dict[str, torch.Tensor]) -> dict[str, float]:
    """Each gradient's `scale` (above): the norm of every gradient of the case together, times sqrt(this tensor's share
    of their elements)."""
    grads = {n: t for n, t in oracle.items() if n.startswith("d")}
    total = sum(t.numel() for t in grads.values())
    whole = torch.linalg.vector_norm(torch.cat([t.flatten() for t in grads.values()])).item() if grads else 0.0
    return {n: whole * (t.numel() / total) ** 0.5 for n, t in grads.items()}


def relative(got: torch.Tensor, oracle: torch.Tensor, scale: float = 0.0) -> float:
    """||got - oracle|| / max(||oracle||, scale): rel_l2 where the oracle is no smaller than `scale`."""
    if torch.linalg.vector_norm(oracle.flatten()).item() >= scale:
        return rel_l2(got, oracle)
    return torch.linalg.vector_norm((got - oracle).flatten()).item() / scale


def allowed(name: str, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype, scale: float = 0.0) -> tuple[float, Bound]:
    """The threshold of output `name` and the term that set it."""
    if dtype == torch.float64:
        return TOLERANCES["float64"].grad, Bound(field="grad", source=Source.TABLE)
    short = str(dtype).removeprefix("torch.")
    own = relative(reference, oracle, scale)
    if torch.linalg.vector_norm(oracle.flatten()).item() < scale:
        roundoff = torch.finfo(dtype).eps / 2
        if K * own < ULPS * roundoff:
            return ULPS * roundoff, Bound(field=FIELD, source=Source.ROUNDING,
                                          term=f"{ULPS:g} x {short} unit roundoff {roundoff:.3g} at the case's gradient scale ({name} is smaller)")
    rounding = rel_l2(oracle.to(dtype), oracle)
    if K * own >= ULPS * rounding:
        return K * own, Bound(field=FIELD, source=Source.GOLDEN_FLOOR, floor=own,
                              term=f"{K:g} x the {short} per-document reference's own error {own:.3g}")
    return ULPS * rounding, Bound(field=FIELD, source=Source.ROUNDING, term=f"{ULPS:g} x {short} rounding of {name}: {rounding:.3g}")


def compare(kernel: str, name: str, got: torch.Tensor, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype,
            where: str = "", scale: float = 0.0) -> Comparison:
    threshold, bound = allowed(name, reference, oracle, dtype, scale)
    return Comparison(arms=Arms(ArmId(kernel), ArmId(kernel, role=Role.ORACLE)), quantity=name, item="", metric="rel_l2",
                      observed=relative(got, oracle, scale), threshold=threshold, where=where, bound=bound)
