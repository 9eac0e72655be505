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


def allowed(name: str, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype) -> tuple[float, Bound]:
    """The threshold of output `name` and the term that set it."""
    if dtype == torch.float64:
        return TOLERANCES["float64"].grad, Bound(field="grad", source=Source.TABLE)
    short = str(dtype).removeprefix("torch.")
    own = rel_l2(reference, oracle)
    rounding = rel_l2(oracle.to(dtype), oracle)
    if K * own >= ULPS * rounding:
        return K * own, Bound(field=FIELD, source=Source.GOLDEN_FLOOR, floor=own,
                              term=f"{K:g} x the {short} per-document reference's own error {own:.3g}")
    return ULPS * rounding, Bound(field=FIELD, source=Source.ROUNDING, term=f"{ULPS:g} x {short} rounding of {name}: {rounding:.3g}")


def compare(kernel: str, name: str, got: torch.Tensor, reference: torch.Tensor, oracle: torch.Tensor, dtype: torch.dtype,
            where: str = "") -> Comparison:
    threshold, bound = allowed(name, reference, oracle, dtype)
    return Comparison(arms=Arms(ArmId(kernel), ArmId(kernel, role=Role.ORACLE)), quantity=name, item="", metric="rel_l2",
                      observed=rel_l2(got, oracle), threshold=threshold, where=where, bound=bound)
