"""Resolve an engine from a name: a registered name, an entry point, "package.module:Class", or "path/to/file.py:Class".

Engines register through the `packcheck.engines` entry-point group (name -> class), so packcheck
never imports an engine it was not asked for; the mutants (an engine carrying one known bug, its class's
`bug`) through `packcheck.mutants`, which is how they are listed apart without importing any engine.
Names are unique across both; an unknown name gets near-match suggestions.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

from packcheck.harness.engines.protocol import Engine
from packcheck.harness.engines.versions import check_versions
from packcheck.harness.registry import suggest

ENTRY_POINT_GROUP = "packcheck.engines"
MUTANT_GROUP = "packcheck.mutants"


class EngineNotFound(LookupError):
    pass


def _entry_points(groups: tuple[str, ...] = (ENTRY_POINT_GROUP, MUTANT_GROUP)) -> dict:
    return dict(_scan(groups, _installed_state()))


def _installed_state() -> tuple[tuple[str, float], ...]:
    """sys.path with each folder's modification time: installing or removing a package changes its folder's (a new
    dist-info or .pth in site-packages), so a scan is redone exactly when what it read may have changed."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime))
        except OSError:
            state.append((entry, -1.0))
    return tuple(state)


@functools.lru_cache(maxsize=4)
def _scan(groups: tuple[str, ...], _state: tuple) -> dict:
    """Every entry point of `groups` by name, read once per installed state: `entry_points()` reads the metadata of every
    installed distribution (25-50 ms here), and a run resolves engines hundreds of times (each mutant, each scenario)."""
    found: dict = {}
    for ep in (ep for group in groups for ep in entry_points(group=group)):
        if ep.name in found and found[ep.name].value != ep.value:
            raise RuntimeError(
                f"two packages register engine {ep.name!r}: {found[ep.name].value} and {ep.value}; uninstall one"
            )
        found[ep.name] = ep
    return found


def engine_names() -> list[str]:
    return sorted(_entry_points())


def mutant_names() -> list[str]:
    return sorted(_entry_points((MUTANT_GROUP,)))


def mutant_modules() -> dict[str, str]:
    """Each registered mutant's module name, by the mutant's name, from its entry point: no engine imported."""
    return {name: ep.module for name, ep in sorted(_entry_points((MUTANT_GROUP,)).items())}


def mutants_by_bug() -> dict[str, list[tuple[str, Engine]]]:
    """The registered mutants, built, by the bug each carries (its `bug`, a docs/bugs.md id): (name, engine) pairs."""
    found: dict[str, list[tuple[str, Engine]]] = {}
    for name in mutant_names():
        engine = resolve_engine(name)
        found.setdefault(engine.bug, []).append((name, engine))
    return found


def _load_class(spec: str) -> type:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:  # a console script does not see the current directory; `python -m` does
        sys.path.append(os.getcwd())
    try:
        module = _import_file(module_name) if names_a_file(spec) else importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise EngineNotFound(f"engine {spec!r}: cannot import module {module_name!r} ({err})") from err
    except Exception as err:  # noqa: BLE001 - the engine's own code fails to import: its bug, not packcheck's
        raise EngineNotFound(f"engine {spec!r}: importing module {module_name!r} raised {type(err).__name__}: {err}") from err
    try:
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except AttributeError as err:
        raise EngineNotFound(f"engine {spec!r}: module {module_name!r} has no attribute {attr!r}") from err
    return obj


def names_a_file(spec: str) -> bool:
    """Whether a 'module:Class' spec names its module by a file path ('./my_engine.py:MyEngine')."""
    return names_a_class(spec) and spec.partition(":")[0].endswith(".py")


def file_spec_made_absolute(spec: str) -> str:
    """A file spec with its path made absolute (an engine process, a reproduce command may start elsewhere); others as given."""
    if not names_a_file(spec):
        return spec
    path, _, attr = spec.partition(":")
    return f"{Path(path).expanduser().resolve()}:{attr}"


def _import_file(path: str):
    """The module a Python file holds, imported under its file name, its folder on the import path (for its own imports)."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ModuleNotFoundError(f"no file {file}")
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    found = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(found)
    sys.modules[file.stem] = module
    found.loader.exec_module(module)
    return module


def names_a_class(spec: str) -> bool:
    """Whether an engine spec is a class's import path ('package.module:Class') rather than a registered name or a
    name pattern: the one test of that, for resolving, expanding and checking specs."""
    return ":" in spec


def unknown_engine(spec: str, registered) -> str:
    """Why `spec` names no engine: the closest few registered names (never all of them), and the other way to name one."""
    close = suggest(spec, registered)
    hint = ("An engine's `name` attribute is only its label: pass its class as 'package.module:Class' "
            "(e.g. --engine my_engine:MyEngine for class MyEngine in my_engine.py). " if "." in spec and not close else "")
    return (f"no engine named {spec!r} in this environment{close or '.'} {hint}`packcheck list engines` lists the "
            f"{len(registered)} registered here; or pass 'package.module:Class'. An engine registered by another package "
            "needs that package installed here (a nox session builds its own environment)")


def resolve_engine(spec: str | Engine | type) -> Engine:
    """Return an Engine instance for a name, a "module:Class" string, an Engine class or instance."""
    if isinstance(spec, Engine):
        return spec
    if isinstance(spec, type):
        return _instantiate(spec, repr(spec))
    if names_a_class(spec):
        return _instantiate(_load_class(spec), spec)
    registered = _entry_points()
    if spec not in registered:
        raise EngineNotFound(unknown_engine(spec, registered))
    try:
        cls = registered[spec].load()
    except Exception as err:  # noqa: BLE001 - e.g. an adapter whose extra (its engine) is not installed here
        raise EngineNotFound(f"engine {spec!r} ({registered[spec].value}): importing it raised {type(err).__name__}: {err}") from err
    return _instantiate(cls, spec)


def _instantiate(cls: type, spec: str) -> Engine:
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise EngineNotFound(f"engine {spec!r} is {cls!r}, not a subclass of packcheck.harness.engines.Engine")
    check_versions(cls)  # an engine release its adapter does not support: one clear error, before any of its code runs
    return cls()
