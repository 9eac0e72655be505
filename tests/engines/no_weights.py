"""The reference without its `dloss_dlogprobs` report, for the test that the gradient oracle is
unsupported (not passed) for an engine that does not say which weights it backpropagated."""

from __future__ import annotations

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine


class ReferenceWithoutWeights(ReferenceEngine):
    name = "reference.without-weights"
    capabilities = replace(ReferenceEngine.capabilities, reports=ReferenceEngine.capabilities.reports - {"dloss_dlogprobs"})
