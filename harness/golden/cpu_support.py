"""Which ATen capabilities this CPU can run, decided before any kernel path is started.

torch honours `ATEN_CPU_CAPABILITY` without asking the CPU: under `ATEN_CPU_CAPABILITY=avx512`
`torch.backends.cpu.get_cpu_capability()` answers AVX512 on any x86 CPU and the first vectorised
kernel dies of SIGILL where AVX-512 is missing (issue 50). So two witnesses decide, and a
capability runs only if both allow it:

- the CPU's flags (/proc/cpuinfo, or the file `PACKCHECK_CPUINFO` names, to see what packcheck
  does on another CPU): the flags torch's own detection requires (ATen's DispatchStub);
- torch's own choice, `get_cpu_capability()` in a process without `ATEN_CPU_CAPABILITY`: the
  highest capability of the ladder it would pick here (it also knows what this build has).

    unavailable(("default", "avx2", "avx512"))   # {"avx512": "the CPU's flags (/proc/cpuinfo) lack avx512bw, ..."}

A path that still dies of SIGILL (flags that lie: a VM, an emulator) is skipped where it runs
(harness/golden/kernel_paths.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache
from pathlib import Path

CPUINFO_ENV = "PACKCHECK_CPUINFO"
# The flags torch's detection asks cpuinfo for (ATen's DispatchStub.cpp), in /proc/cpuinfo's spelling.
REQUIRED_FLAGS = {"default": (), "avx2": ("avx2", "fma"), "avx512": ("avx512f", "avx512vl", "avx512bw", "avx512dq", "fma"),
                  "sve256": ("sve",)}
ASK_TORCH = "import torch; print(torch.backends.cpu.get_cpu_capability().lower())"


def cpuinfo_file() -> Path:
    return Path(os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo")


def cpu_flags(path: Path) -> frozenset[str] | None:
    """The flags of the first processor in a /proc/cpuinfo-style file (x86 `flags`, arm `Features`); None if unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


@cache
def torch_capability() -> str:
    """The capability torch picks on this CPU by itself (lower case). Asked in a fresh process when this one runs
    under ATEN_CPU_CAPABILITY, which torch reports back unchecked."""
    if "ATEN_CPU_CAPABILITY" not in os.environ:
        import torch

        return torch.backends.cpu.get_cpu_capability().lower()
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    done = subprocess.run([sys.executable, "-c", ASK_TORCH], env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()[-1]


def unavailable(ladder: tuple[str, ...]) -> dict[str, str]:
    """{capability: the one-line reason this CPU cannot run it} for the capabilities of `ladder` (lowest first)."""
    source = cpuinfo_file()
    flags = cpu_flags(source)
    chosen = torch_capability()
    reachable = ladder[:ladder.index(chosen) + 1] if chosen in ladder else ladder[:1]
    reasons = {}
    for capability in ladder:
        missing = [flag for flag in REQUIRED_FLAGS.get(capability, ()) if flags is not None and flag not in flags]
        if missing:
            reasons[capability] = f"the CPU's flags ({source}) lack {' '.join(missing)}"
        elif capability not in reachable:
            reasons[capability] = f"torch picks {chosen} on this CPU (get_cpu_capability() without ATEN_CPU_CAPABILITY), not {capability}"
    return reasons
