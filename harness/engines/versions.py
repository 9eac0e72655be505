"""The releases of a third-party engine an adapter supports, checked where the engine is built.

An adapter declares them on its class as PEP 508 requirements, one per distribution:

    class HfTrainerEngine(TrainerEngine):
        engine_versions = ("transformers>=4.45,<6", "accelerate>=1.0")

`resolve_engine` checks them in the engine's own process before it constructs the engine: an
installed release outside the range (or a distribution not installed) raises
`EngineVersionError` naming the installed version, the range and the fix, so the harness
reports it once, as the engine's "did not start" verdict in every cell, instead of every arm
crashing somewhere inside the engine on an API it does not have.

A known finding of some releases only (`KnownFinding.engine_versions`, the same form) is kept in
the engine's description only where the installed releases satisfy it (`holds_here`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version


class EngineVersionError(RuntimeError):
    """An installed release of the engine's distribution lies outside what its adapter supports."""


def installed(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def requirement(owner: str, text: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as err:
        raise ValueError(f"{owner}: {text!r} is not a PEP 508 requirement (write e.g. 'transformers>=4.45,<6'): {err}") from None


def satisfied(req: Requirement) -> bool:
    """Whether the installed release satisfies `req` (pre-releases included: a dev build is judged by its number)."""
    found = installed(req.name)
    try:
        return found is not None and req.specifier.contains(Version(found), prereleases=True)
    except InvalidVersion:
        return False


def holds_here(engine_versions: tuple[str, ...] | None) -> bool:
    """Whether every requirement holds in this environment (None: no requirement, always)."""
    return all(satisfied(requirement("a known finding's engine_versions", text)) for text in engine_versions or ())


def unsupported_versions(name: str, engine_versions: tuple[str, ...]) -> str | None:
    """Why the installed releases cannot run engine `name`, or None when each lies in its declared range."""
    reqs = [requirement(f"engine {name!r}: engine_versions", text) for text in engine_versions]
    problems = [f"{r.name} is not installed" if installed(r.name) is None else
                f"installed {r.name} {installed(r.name)} is outside the supported range {r}"
                for r in reqs if not satisfied(r)]
    if not problems:
        return None
    wanted = " ".join(f"'{r}'" for r in reqs)
    return (f"engine {name!r}: {'; '.join(problems)}. Fix: pip install {wanted} into this environment, or run it in one of "
            f"its own (`nox -s releases` runs it under each release packcheck tests); it supports {', '.join(map(str, reqs))}")


def check_versions(cls: type) -> None:
    """Raise EngineVersionError if the installed releases lie outside the class's `engine_versions`."""
    reason = unsupported_versions(getattr(cls, "name", cls.__name__), tuple(getattr(cls, "engine_versions", ())))
    if reason is not None:
        raise EngineVersionError(reason)
