"""The one tolerance policy table: per dtype, the largest allowed error of each quantity.

float64 is the logic check: a correct engine agrees with itself across layouts to ~1e-15
relative, and every bug in BUGS.md moves some quantity by 1e-4 or more, so 1e-10 leaves five
orders of magnitude on both sides. float32 and bfloat16 entries are provisional until the
calibration against the float64 oracle (noise floor x k) replaces them; scenarios that need a
different bound override it next to their entry, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Tolerance:
    logprobs: float  # max |a - b| over every token, in nats
    loss: float  # |a - b| / |b|
    grad: float  # ||a - b|| / ||b|| per parameter tensor
    dloss_dlogprobs: float  # max |a - b| / max |b|
    params_after: float  # ||a - b|| / ||b|| per parameter tensor
    count: float = 0.0  # token counts are integers: exact


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(logprobs=1e-10, loss=1e-10, grad=1e-10, dloss_dlogprobs=1e-10, params_after=1e-10),
    "float32": Tolerance(logprobs=1e-4, loss=1e-5, grad=1e-4, dloss_dlogprobs=1e-5, params_after=1e-5),
    "bfloat16": Tolerance(logprobs=1e-1, loss=2e-2, grad=5e-2, dloss_dlogprobs=1e-2, params_after=1e-2),
}


# Against the float64 oracle, a lower-precision run may err by this many times the reference
# trainer's own error at that precision (its noise floor, measured when goldens are written).
NOISE_FACTOR = 10.0


def tolerance_from_floor(floor: dict[str, float], factor: float = NOISE_FACTOR) -> Tolerance:
    """A tolerance of `factor` x the measured noise floor per quantity, never below float64's."""
    tight = TOLERANCES["float64"]
    return Tolerance(**{name: max(factor * floor[name], getattr(tight, name)) for name in NOISE_QUANTITIES})


NOISE_QUANTITIES = ("logprobs", "loss", "grad", "dloss_dlogprobs", "params_after")


def tolerance_for(dtype: str) -> Tolerance:
    if dtype not in TOLERANCES:
        raise KeyError(f"no tolerance policy for dtype {dtype!r}; known: {sorted(TOLERANCES)}")
    return TOLERANCES[dtype]
