"""The gradient oracle's arm for an engine's arm: the same Case, with the engine's own per-token
weights as a `weighted_logprob_sum` loss, in float64 (on the CPU, or on the GPU of a cuda run).

The arm keeps the checkpoint (and its frozen parameters), the samples, the layout, the partition and
the parallel plan, so every weight lands on the same row position the engine's did, including a
document's token 0 predicted from what precedes it in a packed row; the reference (ORACLE_ENGINE)
then backpropagates exactly those weights through its float64 model. A MoE model keeps its
load-balancing loss: the contract adds it to whatever loss is backpropagated, in the oracle as in
the engine, so the two gradients differ by nothing but the backward through the log-probs.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from packcheck.harness.compare.arm_id import ArmId
from packcheck.harness.contract import Case, LossKind, LossSpec, StepResult

WEIGHTED = LossSpec(kind=LossKind.WEIGHTED_LOGPROB_SUM)


def oracle_of(case: Case, **changes) -> Case:
    """The reference's arm for an engine's `case`, in float64 on the case's own device: on the CPU as the float64 logic
    check always ran, on a GPU there (an H200 runs a 0.6b step in float64 in about a second; the CPU took minutes)."""
    return case.with_(name=str(ArmId(case.name).oracle), dtype="float64", attention="auto", optimizer=None, **changes)


def oracle_case(case: Case, result: StepResult) -> Case:
    """`case` with loss sum(w logp), w = the engine's reported dloss_dlogprobs, in float64 (oracle_of)."""
    assert result.dloss_dlogprobs is not None, "only an arm whose engine reports dloss_dlogprobs has an oracle"
    samples = tuple(dataclasses.replace(sample, logprob_weights=tuple(w.double().tolist()))
                    for sample, w in zip(case.samples, result.dloss_dlogprobs))
    return oracle_of(case, samples=samples, loss=WEIGHTED)


def oracle_arms(cases: Mapping[str, Case], results: Mapping[str, StepResult]) -> dict[str, Case]:
    """One oracle arm per engine arm that reported its per-token weights, by the engine arm's name."""
    return {name: oracle_case(cases[name], result) for name, result in results.items() if result.dloss_dlogprobs is not None}
