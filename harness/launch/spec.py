"""The spec string a rank resolves its engine from: "package.module:Class" for an Engine instance.

Ranks are fresh processes: they construct the engine class with no arguments, as
`--engine package.module:Class` does. A class defined in `__main__` or inside a function cannot
be imported there and is refused here, with the reason.
"""

from __future__ import annotations

import importlib

from packcheck.harness.engines import Engine


def engine_spec(engine: Engine | type[Engine]) -> str:
    cls = engine if isinstance(engine, type) else type(engine)
    spec = f"{cls.__module__}:{cls.__qualname__}"
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ValueError(f"engine class {spec} cannot be imported by another process: define it at the top level of an importable module")
    found = importlib.import_module(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not cls:
        raise ValueError(f"{spec} does not name the engine's class {cls!r} (it was replaced or generated at run time)")
    return spec
