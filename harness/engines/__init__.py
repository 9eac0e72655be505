"""The engine side of the contract: the Engine base class, capabilities, registry, validation."""

from harness.engines.capabilities import Capabilities
from harness.engines.findings import KnownFinding, finding_for
from harness.engines.protocol import Engine, UnsupportedCase
from harness.engines.registry import EngineNotFound, engine_names, mutant_names, resolve_engine
from harness.engines.validate import InvalidResult, validate_result

__all__ = [
    "Capabilities", "Engine", "KnownFinding", "finding_for", "EngineNotFound", "InvalidResult", "UnsupportedCase",
    "engine_names", "mutant_names", "resolve_engine", "validate_result",
]
