"""The Engine an adapter implements: declare capabilities, run one Case, return a StepResult.

    class MyEngine(Engine):
        name = "my_engine"
        capabilities = Capabilities(families=frozenset({"llama"}))

        def run(self, case: Case) -> StepResult:
            self.require_supported(case)   # raises UnsupportedCase with the reason
            ...                            # translate the Case, run one step, translate back

That is the whole contract. The harness validates every StepResult field; it never asks an
engine how it packs, only what it computed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines.capabilities import Capabilities
from packcheck.harness.engines.findings import KnownFinding


class UnsupportedCase(Exception):
    """Raised by an engine handed a Case outside its declared capabilities."""


class Engine(ABC):
    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    # real bugs of a third-party engine, reproduced and pinned (harness/engines/findings.py)
    known_findings: ClassVar[tuple[KnownFinding, ...]] = ()
    # the releases of the engine it wraps that an adapter supports, as PEP 508 requirements
    # ("transformers>=4.45,<6"), checked before the engine is built (harness/engines/versions.py)
    engine_versions: ClassVar[tuple[str, ...]] = ()
    # a mutant's one known bug (its docs/bugs.md id), registered under `packcheck.mutants`; None for every other engine
    bug: ClassVar[str | None] = None

    @abstractmethod
    def run(self, case: Case) -> StepResult:
        """Run one training step on `case` and report it; raise UnsupportedCase if it cannot."""

    def unsupported_reason(self, case: Case) -> str | None:
        """Why this engine cannot run `case`, or None. Override to add engine-specific limits
        (call super() first); the harness reports such cases as unsupported."""
        return self.capabilities.unsupported_reason(case)

    def require_supported(self, case: Case) -> None:
        reason = self.unsupported_reason(case)
        if reason is not None:
            raise UnsupportedCase(f"{self.name}: {reason}")
