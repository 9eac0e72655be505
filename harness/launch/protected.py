"""What an engine's processes may not write: the folders each launch's mount namespace makes read-only
(harness/launch/confine.py), worked out once by the harness for a pool.

    plan = confinement(workdir, also=(run_dir,))     # the read-only folders and the mode, for every launch of a pool
    plan.for_launch(launch_dir, device)               # what the warden of one launch is sent

Read-only:
- packcheck's own code and package data: the folders the packages harness, impls, conformance and fixtures are imported
  from (the checkout's folders in an editable install), the reference and its goldens among them;
- the Python installation and every import root that holds torch, transformers, safetensors or numpy: what the
  reference imports. Not every entry of the import path: the harness's working directory is one (`python -m`), and it
  may be /tmp or the home folder, where engines and torch keep caches;
- the checkpoint cache, the goldens where PACKCHECK_GOLDEN_DIR moves them, the pool's launches folder and the run
  directory (`--out`, saved arms included).
Writable again on top: the launch's own folder (its case folders and its private checkpoint copy). A folder that holds
the temporary directory or /dev/shm, or is the root, is left out (engines and NCCL write there): an `--out` that is
such a folder is then not protected by the namespace, only by the checks of the run (docs/isolation.md).

PACKCHECK_CONFINE: "auto" (the default), "userns" (the user-namespace path even where a plain mount namespace would
do: its tests), "off" (no namespace: the run relies on its checks alone, as on a machine that allows neither).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MODES = ("auto", "userns", "off")
PACKAGES = ("harness", "impls", "conformance", "fixtures")  # the folders setup.py installs under `packcheck`
DEPENDENCIES = ("torch", "transformers", "safetensors", "numpy")


@dataclass(frozen=True, slots=True)
class Confinement:
    mode: str
    read_only: tuple[str, ...]

    def for_launch(self, launch_dir: Path, device: str) -> dict:
        return {"mode": self.mode, "device": device, "read_only": list(self.read_only), "writable": os.path.realpath(launch_dir)}


def mode() -> str:
    chosen = os.environ.get("PACKCHECK_CONFINE", "auto")
    if chosen not in MODES:
        raise ValueError(f"PACKCHECK_CONFINE={chosen!r}: one of {', '.join(MODES)}")
    return chosen


def package_folders() -> list[Path]:
    """Where packcheck's code and package data are imported from."""
    found = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(f"packcheck.{name}")
        found += [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    return found


def dependency_folders() -> list[Path]:
    """The installation's own import roots (the standard library, site-packages) and any root that holds a package the
    reference imports."""
    installation = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = [Path(p) for p in sys.path if p and any(os.path.realpath(p).startswith(root + os.sep) for root in installation)]
    for name in DEPENDENCIES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.append(Path(next(iter(spec.submodule_search_locations))).parent)
    return found


def _shared_scratch(folder: str) -> bool:
    """The root, or a folder that holds the temporary directory or /dev/shm: engines, torch and NCCL write there."""
    return any(os.path.commonpath([folder, os.path.realpath(scratch)]) == folder for scratch in (tempfile.gettempdir(), "/dev/shm"))


def confinement(workdir: Path, also: tuple[Path, ...] = ()) -> Confinement:
    """The confinement of every launch of a pool whose launches live under `workdir`; `also`: more folders to protect
    (the run directory)."""
    from packcheck.harness.golden import golden_dir
    from packcheck.harness.models.checkpoint import cache_dir

    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)  # made by the harness now, not by an engine first
    wanted = [*package_folders(), *dependency_folders(), cache, golden_dir(), Path(workdir), *also]
    folders: list[str] = []
    for path in wanted:
        folder = os.path.realpath(path)
        if os.path.isdir(folder) and folder not in folders and not _shared_scratch(folder):
            folders.append(folder)
    return Confinement(mode=mode(), read_only=tuple(folders))
