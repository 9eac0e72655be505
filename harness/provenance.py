"""Where a result came from: versions, machine, device, git commit, command, time.

The bottom floor of the harness (docs/architecture.md): it imports nothing of packcheck, so every
part may record provenance.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# The folder holding harness/: the repository root in a checkout, site-packages/packcheck in a wheel.
SOURCE_ROOT = Path(__file__).resolve().parents[1]


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


UNKNOWN = "unknown"
# Written into an installed copy's harness/ by the build (setup.py): the commit of the checkout it was built from.
BUILD_COMMIT = "build_commit.txt"


def git_commit(directory: Path = SOURCE_ROOT) -> str:
    """The commit of the checkout at `directory` (+dirty): an editable install runs from its checkout. Where that is no
    checkout's root (an installed copy: its site-packages may well sit inside some other repository), the commit its
    build recorded (BUILD_COMMIT: a `pip install` of a checkout, a git URL or a wheel built from one); else "unknown"."""
    if not (Path(directory) / ".git").exists():
        built = Path(directory) / "harness" / BUILD_COMMIT
        return built.read_text(encoding="utf-8").strip() if built.is_file() else UNKNOWN
    try:
        out = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return UNKNOWN
    if out.returncode != 0:
        return UNKNOWN
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def device_name(device: str) -> str:
    import torch

    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine()


def cpu_model() -> str:
    """The CPU's marketing name where the OS tells it (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_kernels() -> dict:
    """What decides how this process's float64 sums round on the CPU (harness/golden/kernel_paths.py)."""
    import torch

    return {"model": cpu_model(), "aten_capability": torch.backends.cpu.get_cpu_capability().lower(),
            "threads": torch.get_num_threads(), "mkl_cbwr": os.environ.get("MKL_CBWR", "")}


# The distributions whose release can move an engine's numerics, by the name the environment records them under
# (harness/history keeps them per run, and a step in a margin is annotated with the ones that changed).
ENVIRONMENT_DISTRIBUTIONS = {"torch": "torch", "transformers": "transformers", "accelerate": "accelerate", "flash_attn": "flash-attn",
                             "fla": "flash-linear-attention", "trl": "trl", "verl": "verl", "numpy": "numpy"}


def environment(device: str = "cpu") -> dict:
    """What, besides the engine's own code, decides its numerics here: the releases of ENVIRONMENT_DISTRIBUTIONS ("not
    installed" where absent), torch's CUDA, the GPU (where `device` is cuda and one is visible), the CPU's model and the
    kernel path ATen dispatches to (ATEN_CPU_CAPABILITY, or the best the CPU has), Python."""
    import torch

    gpu = torch.cuda.get_device_name(0) if device == "cuda" and torch.cuda.is_available() else ""
    return ({key: package_version(name) for key, name in ENVIRONMENT_DISTRIBUTIONS.items()}
            | {"cuda": torch.version.cuda or "", "gpu": gpu, "cpu": cpu_model(),
               "cpu_capability": torch.backends.cpu.get_cpu_capability().lower(), "python": sys.version.split()[0]})


def provenance(device: str = "cpu", command: list[str] | None = None) -> dict:
    return {
        "packcheck": package_version("packcheck"),
        "torch": package_version("torch"),
        "transformers": package_version("transformers"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": device,
        "device_name": device_name(device),
        "cpu": cpu_kernels(),
        "git_commit": git_commit(),
        "command": " ".join(command if command is not None else sys.argv),
        "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
