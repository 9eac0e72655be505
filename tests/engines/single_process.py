"""The reference (and engines built on it) without data or context parallelism: for tests that every scenario judges an
engine on the arms it runs (optional distributed arms skipped, never a crash), and for tests that need only the
single-process arms and not the seconds a world-2 or world-4 launch costs."""

from __future__ import annotations

from dataclasses import replace

from packcheck.impls.mutants.rl_token_mean_scope import RlTokenMeanScope
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.fast import ReferenceFast


def single_process(capabilities):
    return replace(capabilities, max_dp=1, max_cp=1, cp_styles=frozenset())


class SingleProcessReference(ReferenceEngine):
    name = "reference.single-process"
    capabilities = single_process(ReferenceEngine.capabilities)


class SingleProcessFast(ReferenceFast):
    name = "reference.fast.single-process"
    capabilities = single_process(ReferenceFast.capabilities)


class SingleProcessTokenMeanScope(RlTokenMeanScope):
    name = "mutant.rl-token-mean-scope.single-process"
    capabilities = single_process(RlTokenMeanScope.capabilities)
