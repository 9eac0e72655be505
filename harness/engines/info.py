"""What the harness knows of an engine without running any of its code in its own process.

Every arm runs in a process of the engine's own (harness/launch); once that process has built the
engine, its rank 0 writes the engine's self-description (`describe`): its name, capabilities, known
findings and, for a mutant, the bug it carries. The harness plans and annotates verdicts from
this data alone, so an engine that exits, hangs or patches the interpreter while it is imported,
built or asked anything cannot touch the harness.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.contract import Case
from packcheck.harness.contract.errors import ContractError
from packcheck.harness.engines.capabilities import Capabilities
from packcheck.harness.engines.findings import KnownFinding
from packcheck.harness.engines.protocol import Engine
from packcheck.harness.engines.versions import holds_here, installed, requirement
from packcheck.harness.text import safe_line

SCHEMA = "packcheck.engine_info/1"
NAME_LIMIT = 1000  # characters of an engine's name kept (whole for any sane name; paths use a shortened form, text.path_name)


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineInfo:
    spec: str  # how a process builds it: a registered name or "package.module:Class"
    name: str  # as the engine calls itself, made safe to print (harness/text.py)
    capabilities: Capabilities
    known_findings: tuple[KnownFinding, ...] = ()
    bug: str | None = None  # a mutant's BUGS.md id
    # the installed release of each distribution its Engine.engine_versions names (("transformers", "4.46.1"), ...): the
    # engine's version, as far as the harness can know it (harness/history labels a run's points by it)
    releases: tuple[tuple[str, str], ...] = ()

    def unsupported_reason(self, case: Case) -> str | None:
        """The declaration's reason; the engine's own process may add its own (Engine.unsupported_reason)."""
        return self.capabilities.unsupported_reason(case)

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "spec": self.spec, "name": self.name, "capabilities": self.capabilities.to_json(),
                "known_findings": [f.to_json() for f in self.known_findings], "bug": self.bug,
                "releases": dict(self.releases)}

    @classmethod
    def from_json(cls, data: dict) -> EngineInfo:
        """Raises ValueError (or KeyError/TypeError) naming what is malformed; the caller reports it as the engine's error."""
        if data.get("schema") != SCHEMA:
            raise ValueError(f"an engine description of schema {data.get('schema')!r}, expected {SCHEMA!r}")
        return cls(spec=str(data["spec"]), name=safe_line(data["name"], NAME_LIMIT), capabilities=Capabilities.from_json(data["capabilities"]),
                   known_findings=tuple(KnownFinding.from_json(f) for f in data["known_findings"]),
                   bug=None if data.get("bug") is None else str(data["bug"]),
                   releases=tuple((str(k), str(v)) for k, v in dict(data.get("releases") or {}).items()))


def describe(engine: Engine, spec: str) -> EngineInfo:
    """The description of a built engine, in the engine's own process: the known findings of the
    releases installed here (a finding of other releases is not this environment's). Raises ContractError naming the
    attribute where the engine declares its capabilities or findings as something else (a dict once ended the launch
    with the cause never named)."""
    declared(engine, "capabilities", Capabilities, "Capabilities(families=frozenset({'llama'}), ...)")
    if not isinstance(engine.known_findings, (tuple, list)) or not all(isinstance(f, KnownFinding) for f in engine.known_findings):
        raise ContractError(f"{type(engine).__name__}.known_findings is {engine.known_findings!r:.80}: declare a tuple of "
                            "packcheck.harness.engines.KnownFinding")
    return EngineInfo(spec=spec, name=safe_line(engine.name, NAME_LIMIT), capabilities=engine.capabilities,
                      known_findings=tuple(f for f in engine.known_findings if holds_here(f.engine_versions)),
                      bug=engine.bug, releases=releases_of(engine))


def releases_of(engine: Engine) -> tuple[tuple[str, str], ...]:
    """(distribution, installed release) for each distribution the engine's engine_versions name, in their order."""
    names = [requirement(f"engine {engine.name!r}: engine_versions", text).name for text in getattr(engine, "engine_versions", ()) or ()]
    return tuple((name, installed(name) or "not installed") for name in dict.fromkeys(names))


def declared(engine: Engine, field: str, kind: type, example: str) -> None:
    """Raises ContractError unless the engine's class attribute `field` is a `kind`."""
    value = getattr(engine, field)
    if not isinstance(value, kind):
        raise ContractError(f"{type(engine).__name__}.{field} is a {type(value).__name__}, not packcheck.harness.engines."
                            f"{kind.__name__}: declare it as {example}")
