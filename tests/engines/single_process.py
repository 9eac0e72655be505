"""The reference without data or context parallelism, for tests that every scenario judges an engine
on the arms it runs (optional distributed arms skipped, never a crash)."""

from __future__ import annotations

from dataclasses import replace

from packcheck.impls.reference.engine import ReferenceEngine


class SingleProcessReference(ReferenceEngine):
    name = "reference.single-process"
    capabilities = replace(ReferenceEngine.capabilities, max_dp=1, max_cp=1, cp_styles=frozenset())
