"""The noise floor: how far the reference trainer's own float32 / bfloat16 run of the golden case
lies from its float64 golden, per quantity.

`packcheck golden regen` measures it and stores it beside the golden; golden_regression in a
lower precision then allows NOISE_FACTOR times it (the flash-attention test style: an engine may
be a few times noisier than the reference in the same precision, never orders of magnitude).
"""

from __future__ import annotations

from harness.compare.metrics import max_rel, rel, rel_l2
from harness.compare.tolerances import NOISE_QUANTITIES
from harness.contract import StepResult


def _worst_tensor_error(observed: dict, reference: dict) -> float:
    return max(max(rel_l2(observed[n], reference[n]), max_rel(observed[n], reference[n])[0]) for n in reference)


def measure_floor(low: StepResult, golden: StepResult) -> dict[str, float]:
    floor = {
        "logprobs": max((a.double() - b.double()).abs().max().item() for a, b in zip(low.logprobs, golden.logprobs)),
        "loss": rel(low.loss, golden.loss),
        "grad": _worst_tensor_error(low.grads, golden.grads),
        "dloss_dlogprobs": max(max_rel(a, b)[0] for a, b in zip(low.dloss_dlogprobs, golden.dloss_dlogprobs)),
        "params_after": _worst_tensor_error(low.params_after, golden.params_after),
    }
    assert set(floor) == set(NOISE_QUANTITIES)
    return floor
