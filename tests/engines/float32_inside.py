"""An engine that computes in float32 inside a float64 run, as a transformers-based engine does: the
reference trainer run at float32 on the float64 case, its result handed back in float64. For the
test that the float32_inside diagnosis names it (tests/test_float32_inside.py)."""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.contract import Case, StepResult
from packcheck.impls.reference.engine import ReferenceEngine


def _float64(tensors):
    if tensors is None:
        return None
    if isinstance(tensors, dict):
        return {name: t.double() for name, t in tensors.items()}
    return [t.double() for t in tensors]


class ReferenceInFloat32(ReferenceEngine):
    name = "reference.float32-inside"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case.with_(dtype="float32") if case.dtype == "float64" else case)
        if result is None or case.dtype != "float64":
            return result
        return replace(result, logprobs=_float64(result.logprobs), grads=_float64(result.grads),
                       dloss_dlogprobs=_float64(result.dloss_dlogprobs), params_after=_float64(result.params_after))
