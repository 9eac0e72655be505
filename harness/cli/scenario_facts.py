"""The registered scenarios' names, invariants and the bugs each catches, read from their entries' source without
importing them: `packcheck list scenarios` prints these few words, and importing the registry imports every scenario's
judge, and torch with it (2-3 s). The registry (harness/scenarios/__init__.py) stays the one place that says which
scenarios exist and in what order; each entry's `Scenario(...)` call stays the one place of its facts.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
from dataclasses import dataclass

PACKAGE = "packcheck.harness.scenarios"


@dataclass(frozen=True, slots=True)
class ScenarioFacts:
    name: str
    invariant: str
    catches: tuple[str, ...]


def facts_in_source() -> list[ScenarioFacts] | None:
    """Each registered scenario's facts, in the registry's order, as its `Scenario(...)` call writes them; None where a
    source cannot be read or says them other than as literals (then import the registry instead)."""
    package = importlib.util.find_spec(PACKAGE)  # imports packcheck.harness, not the registry
    if package is None or not package.submodule_search_locations:
        return None
    registry = _tree(package)
    if registry is None:
        return None
    modules = {alias.asname or alias.name: node.module for node in registry.body if isinstance(node, ast.ImportFrom)
               for alias in node.names}
    loops = [node for node in registry.body if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple)]
    if len(loops) != 1 or not all(isinstance(entry, ast.Name) for entry in loops[0].iter.elts):
        return None
    facts = [_entry(package, modules.get(entry.id), entry.id) for entry in loops[0].iter.elts]
    return None if any(f is None for f in facts) else facts


def _entry(package: importlib.machinery.ModuleSpec, module: str | None, variable: str) -> ScenarioFacts | None:
    """The facts of the scenario `variable` names in `module`, a module of `package`, found in the package's folder:
    importlib.util.find_spec would import the package, the registry itself."""
    prefix = f"{PACKAGE}."
    found = (importlib.machinery.PathFinder.find_spec(module, list(package.submodule_search_locations))
             if module is not None and module.startswith(prefix) else None)
    tree = _tree(found) if found is not None else None
    for node in tree.body if tree is not None else ():
        if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [variable]
                and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "Scenario"):
            keywords = {k.arg: k.value for k in node.value.keywords}
            try:
                name, invariant, catches = (ast.literal_eval(keywords[k]) for k in ("name", "invariant", "catches"))
            except (KeyError, ValueError):
                return None
            return ScenarioFacts(name=name, invariant=invariant, catches=tuple(catches))
    return None


def _tree(spec: importlib.machinery.ModuleSpec) -> ast.Module | None:
    source = spec.loader.get_source(spec.name) if hasattr(spec.loader, "get_source") else None
    return ast.parse(source) if source is not None else None
