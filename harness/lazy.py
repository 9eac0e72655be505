"""Names a package hands out from one of its modules only when first asked for: a module `__getattr__` (PEP 562), for
packages whose light parts are read without torch (`packcheck list`) while one module of theirs imports it."""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_names(package: str, module: str, names: tuple[str, ...]) -> Callable[[str], object]:
    """The `__getattr__` of `package` that imports `package.module` when one of `names` is first asked for."""

    def __getattr__(name: str) -> object:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
