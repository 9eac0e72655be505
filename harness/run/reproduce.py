"""The command that reproduces a verdict, runnable as printed from any directory and any shell: it names the
`packcheck` of the Python installation that ran it by its full path (no activated venv needed).

It names the engine as the user passed it to --engine (a registered name, or `package.module:Class`).
A `module:Class` engine whose module lives outside the Python installation (a file in the
directory the run started from, a folder on PYTHONPATH) imports only from that folder, so the
command starts with `cd FOLDER &&`: an engine process adds its working directory to the import
path (harness/engines/registry.py), and the reports, written elsewhere or read later, then hold a
command that works from any shell. The folder is found without importing the engine (the harness
never runs an engine's code in its own process).
"""

from __future__ import annotations

import os
import shlex
import sys
from importlib.machinery import PathFinder
from pathlib import Path


def import_root(spec: str) -> Path | None:
    """The folder a `module:Class` spec's top-level module is imported from, when that folder is not
    part of the Python installation (site-packages, the standard library); None otherwise."""
    module, colon, _ = spec.partition(":")
    if not colon or not module or module.endswith(".py"):  # a file spec: its path is absolute (harness/run/choices.py)
        return None
    top = module.split(".")[0]
    try:
        found = PathFinder.find_spec(top, [*(p or os.getcwd() for p in sys.path), os.getcwd()])
    except (ImportError, ValueError, OSError):
        return None
    if found is None:
        return None
    where = found.origin if found.origin not in (None, "namespace") else next(iter(found.submodule_search_locations or ()), None)
    if where is None or not os.path.exists(where):  # e.g. an editable install's import hook, not a folder
        return None
    location = Path(where).resolve()
    root = location.parent.parent if location.name == "__init__.py" else location.parent
    installation = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(root == p or p in root.parents for p in installation):
        return None
    return root


def engine_folder(spec: str) -> Path | None:
    """The folder the engine `spec` is found in: a file spec's folder, else import_root's; None for an engine that
    imports from anywhere (registered, installed)."""
    module, colon, _ = spec.partition(":")
    if colon and module.endswith(".py"):
        return Path(module).parent
    return import_root(spec)


def packcheck_program() -> str:
    """The `packcheck` of this Python installation by its full path, so that the command runs in a shell where the venv
    is not activated; where that script is missing (a checkout run without installing), the interpreter runs the CLI."""
    script = Path(sys.executable).parent / "packcheck"
    if script.is_file():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m packcheck.harness.cli.main"


def reproduce_command(spec: str, arguments: str) -> str:
    """`/path/to/packcheck run --engine SPEC ARGUMENTS`, behind a `cd` into the engine's folder where it needs one."""
    return in_engine_folder(spec, f"{packcheck_program()} run --engine {shlex.quote(spec)} {arguments}")


def replay_command(case_file: str | Path, folder: str | Path | None) -> str:
    """`/path/to/packcheck replay CASE` (a shrunk case's file, harness/shrink/record.py) behind a `cd` into `folder`, the
    engine's folder the case recorded (None: an engine that imports from anywhere), so that it runs from anywhere."""
    return in_folder(folder, f"{packcheck_program()} replay {shlex.quote(str(Path(case_file).resolve()))}")


def in_engine_folder(spec: str, command: str) -> str:
    """`command` behind a `cd` into the folder the engine `spec` imports from, where it needs one (the module docstring)."""
    return in_folder(import_root(spec), command)


def in_folder(folder: str | Path | None, command: str) -> str:
    return command if folder is None else f"cd {shlex.quote(str(folder))} && {command}"
