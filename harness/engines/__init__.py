"""The engine side of the contract: the Engine base class, capabilities, registry, validation."""

from packcheck.harness.engines.capabilities import Capabilities
from packcheck.harness.engines.findings import FindingKind, KnownFinding, finding_for
from packcheck.harness.engines.info import EngineInfo, describe
from packcheck.harness.engines.protocol import Engine, UnsupportedCase
from packcheck.harness.engines.registry import EngineNotFound, engine_names, mutant_names, resolve_engine, unknown_engine
from packcheck.harness.engines.validate import InvalidResult, validate_result
from packcheck.harness.engines.versions import EngineVersionError

__all__ = [
    "Capabilities", "Engine", "EngineInfo", "FindingKind", "KnownFinding", "describe", "finding_for", "EngineNotFound", "InvalidResult",
    "UnsupportedCase",
    "EngineVersionError",
    "engine_names", "mutant_names", "resolve_engine", "unknown_engine", "validate_result",
]
