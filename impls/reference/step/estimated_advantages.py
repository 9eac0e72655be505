"""A case whose loss has an advantage estimator, made into the plain policy case the rest of the step runs: each
sample's advantage computed once, before the first forward, from the rewards and groups of the global batch (the
pipeline's `group_advantages`), and put where a given advantage would be."""

from __future__ import annotations

import dataclasses

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.step.pipeline import Pipeline


def with_estimated_advantages(case: Case, pipe: Pipeline, mesh: Mesh) -> tuple[Case, torch.Tensor | None]:
    """The case with every sample's advantage in place of its reward and group, and the advantages [N] (StepResult's
    report); a case without an estimator as it is, and None."""
    if case.loss.advantage is None:
        return case, None
    local = [i for micro_batch in case.partition.per_rank[mesh.dp_rank] for i in micro_batch]
    advantages_N = pipe.group_advantages(case, local, mesh)
    samples = tuple(dataclasses.replace(s, advantages=float(a), reward=None, group=None)
                    for s, a in zip(case.samples, advantages_N.tolist()))
    return case.with_(samples=samples, loss=dataclasses.replace(case.loss, advantage=None)), advantages_N
