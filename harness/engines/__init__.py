"""The engine side of the contract: the Engine base class, capabilities, registry, validation (and its typed problems)."""

from packcheck.harness.engines.capabilities import Capabilities
from packcheck.harness.engines.devices import device_missing
from packcheck.harness.engines.findings import FindingKind, KnownFinding, finding_for
from packcheck.harness.engines.info import EngineInfo, describe
from packcheck.harness.engines.problems import Problem, ProblemKind, problems_from_json, problems_json
from packcheck.harness.engines.protocol import Engine, UnsupportedCase
from packcheck.harness.engines.registry import EngineNotFound, engine_names, mutant_names, mutants_by_bug, names_a_class, resolve_engine, unknown_engine
from packcheck.harness.engines.versions import EngineVersionError
from packcheck.harness.lazy import lazy_names

# validate.py imports torch (2.4 s): its names are imported when first asked for, so that reading the registry
# (`packcheck list mutants`) does not wait for it
__getattr__ = lazy_names(__name__, "validate", ("InvalidResult", "validate_result"))

__all__ = [
    "Capabilities", "Engine", "EngineInfo", "FindingKind", "KnownFinding", "describe", "finding_for", "EngineNotFound", "InvalidResult",
    "UnsupportedCase", "EngineVersionError", "Problem", "ProblemKind", "problems_from_json", "problems_json",
    "device_missing", "engine_names", "names_a_class", "mutant_names", "mutants_by_bug", "resolve_engine", "unknown_engine", "validate_result",
]
