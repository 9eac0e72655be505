"""The one tolerance policy table: per dtype, the largest allowed error of each quantity.

float64 is the logic check. The thresholds are set from a measurement, not from the machine that
wrote the goldens: the reference's golden case re-run on every CPU kernel path this project's
machine can take (ATen default/avx2/avx512 x MKL native/reproducible/compatible x 1 and 2 threads;
`packcheck golden verify --kernel-paths all`) lands from the golden, per quantity and metric, at
most: log-probs 2.7e-15 nats (max_abs), loss 0 (rel), dloss_dlogprobs 0 (max_rel), gradients
2.0e-15 (rel_l2) and 2.4e-15 (max_rel), params_after 9.4e-14 (rel_l2) and 2.2e-12 (max_rel)
measured plainly, but 6.0e-17 and 5.9e-16 measured in the step's conditioning (cond_rel_l2,
cond_max_rel; harness/compare/conditioning.py), which is how params_after is compared. So every
float64 quantity spreads by at most ~3e-15 between CPUs, and 1e-10 puts that spread below 1e-4 of
the tolerance, under the 1e-2 clean margin the suite demands, with a factor of 300 to spare for
bigger models and other CPUs. Every bug in BUGS.md moves some quantity by 1e-4 or more (a margin
of 1e6 and up; the smallest measured is 2.2e9): five orders of magnitude on both sides.
Derivation and tables: docs/margins.md, "Portability".

float32 and bfloat16 entries are CALIBRATION_FACTOR x the reference's noise floor (NOISE_FLOORS): the
largest error of its null comparisons (arm against arm, or against the harness's definition, where
only rounding differs) over every family and many seeds on an H200, measured by `packcheck
calibrate` (harness/run/calibration.py; derivation, per-family floors and the held-out check in
docs/gpu.md, "Calibrated tolerances"). A verdict reports each comparison's error as a multiple of
that floor too. golden_regression uses the noise floor measured on every kernel path against the
float64 golden. Scenarios that need a different bound override it next to their entry, with the reason.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

from packcheck.harness.compare.bound import Bound, Source
from packcheck.harness.compare.null_bound import NULL_CEILING, NULL_FACTOR, GradientNull


@dataclass(frozen=True, kw_only=True, slots=True)
class Tolerance:
    logprobs: float  # max |a - b| over every token, in nats
    loss: float  # |a - b| / max(|b|, 1 nat) (metrics.rel_nats)
    grad: float  # ||a - b|| / ||b|| per parameter tensor
    dloss_dlogprobs: float  # max |a - b| / max |b|
    params_after: float  # ||a - b|| / ||b|| per parameter tensor
    count: float = 0.0  # token counts are integers: exact
    # the fraction of MoE routing assignments that may pick another expert: none in float64; in lower
    # precision a near-tie between two experts' router logits can flip (measured on an H200, bf16, the
    # qwen3_moe golden case: 2 of 448 assignments, 0.45%; float32: none in any arm)
    router_reassigned: float = 0.0
    source: Source = Source.TABLE  # where the noise fields' values come from (harness/compare/bound.py)
    floors: Mapping[str, float] = field(default_factory=dict)  # the noise floor each noise field is a multiple of
    # the engine's own rounding of an arm, measured in the run, by the name of the arm others are compared against: raises
    # the gradient rows against it (harness/compare/null_bound.py); none in the table itself
    nulls: Mapping[str, GradientNull] = field(default_factory=dict)

    @staticmethod
    def limits() -> tuple[str, ...]:
        """The fields that are allowed errors (the rest say where they come from)."""
        return tuple(f.name for f in dataclasses.fields(Tolerance) if f.type == "float")

    def by(self, name: str) -> dict:
        """The threshold of field `name` and the Bound that says so, as Comparison takes them:
        `Comparison(..., **tol.by("loss"))`."""
        noise = name in NOISE_QUANTITIES
        bound = Bound(field=name, source=self.source if noise else Source.TABLE, floor=self.floors.get(name) if noise else None)
        return {"threshold": getattr(self, name), "bound": bound}


NOISE_QUANTITIES = ("logprobs", "loss", "grad", "dloss_dlogprobs", "params_after")

# The reference's noise floor per dtype and field: the largest error of its null comparisons measured on one H200
# (torch 2.11, 2026-12-02) by `packcheck calibrate` over the single-GPU scenarios of every family: float32 seeds 0-27
# and 100-149 (75 seeds; qwen3_5 18, qwen2_5_vl 4), bfloat16 0-22 and 100-149 (63; qwen3_5 14, qwen2_5_vl 4).
# float32: qwen3_5 (the gated delta rule's recurrence) sets every field but params_after, 10-50x the dense families'.
# bfloat16 logprobs: every tiny-model arm pair agreed bit for bit (floor 0); the entry is the qwen3 0.6b preset's
# packed-vs-unpacked difference at seed 100 (0.125 nats: two bf16 spacings of a log-prob near -12).
NOISE_FLOORS: dict[str, dict[str, float]] = {
    "float32": {"logprobs": 1.6e-4, "loss": 1.14e-5, "grad": 2.97e-4, "dloss_dlogprobs": 6.11e-5, "params_after": 1.78e-7},
    "bfloat16": {"logprobs": 0.125, "loss": 8.37e-3, "grad": 2.12e-2, "dloss_dlogprobs": 3.42e-3, "params_after": 8.13e-3},
}
# a clean engine may err by this many times the reference's worst null comparison: with floors from seeds 0-27 alone,
# 4x left every comparison of the held-out seeds 100-149 below its tolerance (the worst at 0.85 of it; at 3x, float32
# qwen3_5's dloss_dlogprobs was over, 3.4x its seeds-0-27 floor)
CALIBRATION_FACTOR = 4.0


# The noise floors measured at a realistic size preset (`--model`), per dtype and field, where they exceed the shipped
# ones: a larger model's bf16 log-probs sit near -ln(vocab) (-11.9 at 151,936 tokens), where a bf16 spacing is 0.0625
# nats, and a loss's derivative through a KL term inherits that rounding (docs/gpu.md, "Noise floors by size").
SIZE_NOISE_FLOORS: dict[str, dict[str, dict[str, float]]] = {}


def table_source() -> str:
    """Where the table's values come from, in a sentence (`packcheck explain`, the report's legend)."""
    return ("the one tolerance table, harness/compare/tolerances.py (TOLERANCES); float64's 1e-10 is derived from the "
            "spread of the reference across CPU kernel paths (~3e-15) in docs/margins.md, \"Portability\"; float32's and "
            f"bfloat16's are {CALIBRATION_FACTOR:g} x the reference's noise floor measured on an H200 over many seeds of every "
            "family (`packcheck calibrate`; docs/gpu.md, \"Calibrated tolerances\"); in those two dtypes a comparison of values "
            "the dtype rounds (a policy weight, a loss, the ratio) is allowed max(table, that rounding propagated through its "
            f"definition), and gradient rows the table alone fails, within {NULL_CEILING:g}x of it, are judged again by max(table, "
            f"{NULL_FACTOR:g} x the engine's own rounding of the arm they are compared against, measured by running that "
            f"arm again in the next dtype up), never above {NULL_CEILING:g} x the table (docs/margins.md)")


def calibrated_fields(floors: Mapping[str, float]) -> dict[str, float]:
    return {name: CALIBRATION_FACTOR * floor for name, floor in floors.items()}


def calibrated(floors: Mapping[str, float], **discrete: float) -> Tolerance:
    return Tolerance(**calibrated_fields({name: floors[name] for name in NOISE_QUANTITIES}), **discrete,
                     source=Source.CALIBRATED, floors=dict(floors))


TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(logprobs=1e-10, loss=1e-10, grad=1e-10, dloss_dlogprobs=1e-10, params_after=1e-10),
    "float32": calibrated(NOISE_FLOORS["float32"], router_reassigned=5e-3),
    "bfloat16": calibrated(NOISE_FLOORS["bfloat16"], router_reassigned=2e-2),
}


# Against the float64 oracle, a lower-precision run may err by this many times the reference
# trainer's own error at that precision (its noise floor, measured when goldens are written).
NOISE_FACTOR = 10.0


def tolerance_from_floor(floor: dict[str, float], dtype: str, factor: float = NOISE_FACTOR) -> Tolerance:
    """A tolerance of `factor` x the measured noise floor per quantity, never below float64's; discrete
    quantities (counts, routing) keep `dtype`'s allowance."""
    tight = TOLERANCES["float64"]
    return Tolerance(**{name: max(factor * floor[name], getattr(tight, name)) for name in NOISE_QUANTITIES},
                     router_reassigned=tolerance_for(dtype).router_reassigned, source=Source.GOLDEN_FLOOR,
                     floors={name: floor[name] for name in NOISE_QUANTITIES})



def table_json(floors: Mapping[str, Mapping[str, float]] | None = None, model: str = "tiny") -> dict[str, dict[str, float]]:
    """The table a run of `model` judges with (with its own `floors` per dtype, where given), as results.json's
    provenance records it."""
    return {dtype: {name: getattr(tolerance_for(dtype, (floors or {}).get(dtype), model), name) for name in NOISE_QUANTITIES}
            for dtype in TOLERANCES}


def size_floors(dtype: str, model: str) -> dict[str, float]:
    """The floors a run of size preset `model` is judged by: the shipped floors, each raised to the one measured at that
    size where that is larger (SIZE_NOISE_FLOORS). Never lowered: a size's floors come from fewer seeds than the
    families' many-seed ones, and a smaller floor there would tighten the table on less evidence."""
    measured = SIZE_NOISE_FLOORS.get(model, {}).get(dtype, {})
    return {name: max(floor, measured.get(name, 0.0)) for name, floor in NOISE_FLOORS[dtype].items()}


def tolerance_for(dtype: str, floors: Mapping[str, float] | None = None, model: str = "tiny") -> Tolerance:
    """`dtype`'s row of the table for a run of `model` (a size preset with floors of its own raises them:
    size_floors); with `floors` (a calibration of the user's own: `packcheck run --noise-floors`),
    CALIBRATION_FACTOR x those floors for the fields they give."""
    if dtype not in TOLERANCES:
        raise KeyError(f"no tolerance policy for dtype {dtype!r}; known: {sorted(TOLERANCES)}")
    if dtype not in NOISE_FLOORS:
        return TOLERANCES[dtype]
    shipped = TOLERANCES[dtype] if dtype not in SIZE_NOISE_FLOORS.get(model, {}) else \
        dataclasses.replace(TOLERANCES[dtype], **calibrated_fields(size_floors(dtype, model)), floors=size_floors(dtype, model))
    if not floors:
        return shipped
    own = {name: floors[name] for name in NOISE_QUANTITIES if name in floors}
    return dataclasses.replace(shipped, **calibrated_fields(own), floors={**shipped.floors, **own})

