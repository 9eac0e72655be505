"""Whether a 'module:Class' engine spec names something, found without importing it: a mistyped spec is one line
and exit 2 before any launch starts, with the close names there are ("did you mean tinytrain_packcheck?").

The harness runs no engine code (docs/isolation.md): importing the module here, or only its parent packages (what
`importlib.util.find_spec` does for a dotted name), would run the engine's imports, torch and its own package
included, in the harness's process, and cost seconds. So the module is found the way the import system finds it,
asking the finders on `sys.meta_path` part by part (an editable install's finder included) without executing any
module, and the class by reading the module's source: a name it never mentions is not there. Where the source cannot
tell (no source, a syntax error, `from x import *`, a module `__getattr__`), the spec passes, and the engine's own
processes import it and say what is wrong, as they do for an engine whose import or constructor raises.
"""

from __future__ import annotations

import ast
import os
import pkgutil
import re
import sys
from importlib.machinery import ModuleSpec, PathFinder
from importlib.metadata import packages_distributions
from pathlib import Path

from packcheck.harness.registry import suggest


def spec_problem(spec: str) -> str | None:
    """Why the class spec `spec` ('package.module:Class' or 'path/to/file.py:Class') names nothing here, in one
    sentence with close matches; None where it names a module and the class may be in it."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        return "names no module or no class: give 'package.module:Class' or 'path/to/file.py:Class'"
    if module_name.endswith(".py"):
        file = Path(module_name).expanduser()
        if not file.is_file():
            return f"no file {file}{suggest(file.name, (p.name for p in file.parent.glob('*.py')))}"
        return class_problem(file.read_text(errors="replace"), f"{file}", attr.split(".")[0])
    found = find_module(module_name)
    if isinstance(found, str):
        return found
    source = module_source(found)
    return None if source is None else class_problem(source, f"{module_name} ({found.origin})", attr.split(".")[0])


def module_source(found: ModuleSpec) -> str | None:
    """The module's source as its loader reads it (a file, a zip), without executing it; None where there is none (a
    namespace package, an extension module) or the loader cannot say."""
    if found.origin is None or not hasattr(found.loader, "get_source"):
        return None
    try:
        return found.loader.get_source(found.name)
    except (ImportError, OSError):
        return None


def search_path() -> list[str]:
    """The import path the engine's processes see: this one, the working directory included (as
    registry._load_class adds it for a console script)."""
    return sys.path if "" in sys.path or os.getcwd() in sys.path else [*sys.path, os.getcwd()]


def find_module(name: str) -> ModuleSpec | str:
    """The spec of module `name`, each part found by the meta path finders in its parent's locations (nothing is
    imported); or why there is no such module."""
    locations, found = search_path(), None
    parts = name.split(".")
    for i in range(len(parts)):
        fullname = ".".join(parts[: i + 1])
        if locations is None:
            return f"no module {name!r}: {'.'.join(parts[:i])} is a module, not a package"
        loaded = sys.modules.get(fullname)
        found = loaded.__spec__ if loaded is not None and loaded.__spec__ is not None else find_spec(fullname, locations)
        if found is None:
            return f"no module {fullname!r} on this Python's import path{suggest(fullname, module_names(parts[:i], locations))}"
        locations = found.submodule_search_locations
    return found


def find_spec(fullname: str, locations: list[str]) -> ModuleSpec | None:
    top = "." not in fullname
    for finder in sys.meta_path:
        finding = getattr(finder, "find_spec", None)
        if finding is not None and (found := finding(fullname, None if top else locations)) is not None:
            return found
    if top:  # the working directory a console script does not have on sys.path
        return PathFinder.find_spec(fullname, locations)
    return None


def module_names(parents: list[str], locations: list[str]) -> list[str]:
    """The dotted names of the modules at `locations` (a package's, or the import path's with installed packages)."""
    prefix = "".join(f"{p}." for p in parents)
    names = {m.name for m in pkgutil.iter_modules(locations)}
    if not parents:
        names |= set(packages_distributions())  # editable installs whose finder pkgutil does not list
    return [prefix + name for name in names]


def class_problem(text: str, module: str, name: str) -> str | None:
    """Why the source `text` of `module` cannot hold top-level `name`, with the close class names it has; None where it
    may: the source mentions the name, or can bind names it does not spell."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None  # the engine's import says where, in its own process
    if open_ended(tree):
        return None
    if re.search(rf"\b{re.escape(name)}\b", text):
        return not_a_class(tree, module, name)
    known = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    known += [alias.asname or alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for alias in n.names]
    return f"module {module} has no class {name!r}{suggest(name, known)}"


def open_ended(tree: ast.Module) -> bool:
    """Whether a module can bind names its source does not spell: `from x import *`, a module `__getattr__`,
    `globals()[...]`, `setattr(module, ...)`, `exec`."""
    return (any(isinstance(n, ast.ImportFrom) and any(alias.name == "*" for alias in n.names) for n in ast.walk(tree))
            or any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)
            or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("globals", "setattr", "exec")
                   for n in ast.walk(tree)))


def not_a_class(tree: ast.Module, module: str, name: str) -> str | None:
    """Why the top-level `name` the source mentions is no class: bound only by `import` (a module) or `def` (a function),
    or never bound at the top level (a word in a comment, an attribute); None where a binding may be a class (a class
    statement, `from x import`, an assignment, anything the module does that the source cannot tell)."""
    kinds = set()
    for node in top_level(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kinds |= {type(node).__name__ for alias in node.names if (alias.asname or alias.name.split(".")[0]) == name}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            kinds.add(type(node).__name__)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and binds(node, name):
            kinds.add("other")  # an assignment, a loop's or a with's target: may bind it to a class
    if kinds - {"Import", "FunctionDef", "AsyncFunctionDef"}:
        return None
    what = "a module" if "Import" in kinds else "a function" if kinds else "a name it never binds"
    return f"{name!r} in module {module} is {what}, not an engine class: name the class, as 'package.module:Class'"


def top_level(body: list[ast.stmt]):
    """The statements that run at import, inside `if`, `try` and `with` blocks too (not in functions or classes)."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try, ast.TryStar, ast.With, ast.For, ast.While)):
            yield node  # its own targets (a loop's, an `as` name): binds() walks it
            for field in ("body", "orelse", "finalbody"):
                yield from top_level(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from top_level(handler.body)
        else:
            yield node


def binds(node: ast.stmt, name: str) -> bool:
    """Whether `node` (its nested statements included) stores to `name`: `name = ...`, `for name in`, `as name`."""
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == name for n in ast.walk(node))
