"""A module's docstring read from its source, without importing the module: `packcheck list mutants` describes each
mutant by its module's docstring, and importing a mutant imports the reference trainer and torch (3 s) for a few words."""

from __future__ import annotations

import ast
import importlib
import importlib.util


def module_doc(module_name: str) -> str | None:
    """What `module_name.__doc__` is once imported; imported after all where no source can be read (a compiled module)."""
    spec = importlib.util.find_spec(module_name)  # imports the module's packages (their __init__), not the module
    source = spec.loader.get_source(module_name) if spec is not None and hasattr(spec.loader, "get_source") else None
    if source is None:
        return importlib.import_module(module_name).__doc__
    return ast.get_docstring(ast.parse(source), clean=False)  # clean=False: the string as written, as __doc__ holds it
