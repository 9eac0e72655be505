"""Engines for the gradient null's tests (tests/test_gradient_null.py). A small gradient bug within a null's reach: the
reference whose distributed arms report every gradient 15% too large (a loss scale off by the world's share, say), and
nothing else wrong; each failing row is a gradient within NULL_CEILING x the table, so the run measures its base arm's
null, which must not lift it. And an engine that cannot run a null at all: the reference declaring bfloat16 alone."""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.contract import Case, StepResult
from packcheck.impls.reference.engine import ReferenceEngine

SCALE = 1.15


class DistributedGradsScaled(ReferenceEngine):
    name = "reference.distributed-grads-scaled"

    def run(self, case: Case) -> StepResult | None:
        result = super().run(case)
        if result is None or case.parallel.world_size == 1:
            return result
        return replace(result, grads={name: SCALE * g for name, g in result.grads.items()})


class Bfloat16Only(ReferenceEngine):
    """The reference declaring bfloat16 alone: it declines the float32 run of a null."""

    name = "reference.bfloat16-only"
    capabilities = replace(ReferenceEngine.capabilities, dtypes=frozenset({"bfloat16"}))
