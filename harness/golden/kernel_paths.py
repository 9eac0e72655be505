"""CPU kernel paths: the settings under which the same float64 computation rounds differently.

A golden written on one CPU must hold on every other. What differs between CPUs is which kernels
reduce the sums: ATen's vectorised kernels per instruction set (`ATEN_CPU_CAPABILITY`: default,
avx2, avx512 on x86), MKL's GEMM code paths (`MKL_CBWR`: its native dispatch, a reproducible
branch, a compatible one), and the thread count. One machine can take every one of those paths
it supports, each in a fresh process (they are read at start-up), and so show the spread another
CPU would see. Measured on the project's machine: the thread count changes nothing at these
sizes, each ATen capability and each MKL mode does (docs/margins.md, "Portability").

A path whose capability this CPU cannot run is skipped with its reason, never run: torch does not
fall back from an `ATEN_CPU_CAPABILITY` the CPU lacks, it dies of SIGILL (harness/golden/cpu_support.py).
A path whose process dies of SIGILL all the same is skipped as not available here.

    paths = kernel_paths()
    runs = run_on_paths(paths, "reference", {"llama": case}, workdir)
    runs.ran        # {path name: PathRun}
    runs.skipped    # {path name: why this CPU cannot run it}
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.golden.cpu_support import unavailable

ATEN_LADDERS = {"x86_64": ("default", "avx2", "avx512"), "amd64": ("default", "avx2", "avx512"), "aarch64": ("default", "sve256"),
                "arm64": ("default", "sve256")}
MKL_MODES = {"native": {}, "cbwr-auto": {"MKL_CBWR": "AUTO"}, "cbwr-compatible": {"MKL_CBWR": "COMPATIBLE"}}
PATH_SECONDS = 300.0  # one process: import torch, run the cases (seconds on an idle machine; stretched by the load)
WORKER = (sys.executable, "-m", "packcheck.harness.golden.path_worker")  # + JOB.json OUT_DIR


@dataclass(frozen=True, kw_only=True, slots=True)
class KernelPath:
    capability: str  # the ATen capability asked for (ATEN_CPU_CAPABILITY)
    mkl: str  # a MKL_MODES key
    threads: int

    @property
    def name(self) -> str:
        return f"aten={self.capability} mkl={self.mkl} threads={self.threads}"

    @property
    def env(self) -> dict[str, str]:
        return {"ATEN_CPU_CAPABILITY": self.capability, "OMP_NUM_THREADS": str(self.threads), **MKL_MODES[self.mkl]}


@dataclass(frozen=True, kw_only=True, slots=True)
class PathRun:
    path: KernelPath
    capability: str  # the ATen capability the process reported (torch takes ATEN_CPU_CAPABILITY as given)
    results: dict[str, StepResult]


@dataclass(frozen=True, kw_only=True, slots=True)
class PathRuns:
    ran: dict[str, PathRun]
    skipped: dict[str, str]  # path name -> why this CPU cannot run it, one line

    def summary(self) -> str:
        """Which paths ran and which were skipped and why, one line."""
        ran = f"ran {len(self.ran)} of {len(self.ran) + len(self.skipped)} kernel paths"
        if not self.skipped:
            return ran
        by_capability = {name.split()[0]: reason for name, reason in self.skipped.items()}  # "aten=avx512": its reason
        return f"{ran}; skipped {len(self.skipped)}, " + "; ".join(f"{cap}: {reason}" for cap, reason in by_capability.items())


def kernel_paths(threads: int | None = None) -> list[KernelPath]:
    """Every ATen capability this architecture knows x every MKL mode, one thread each; and each
    capability once more on every core (`threads`, default: all)."""
    import torch

    capabilities = ATEN_LADDERS.get(platform.machine().lower(), ("default",))
    modes = MKL_MODES if torch.backends.mkl.is_available() else {"native": {}}
    threads = threads or os.cpu_count() or 1
    paths = [KernelPath(capability=cap, mkl=mode, threads=1) for cap in capabilities for mode in modes]
    paths += [KernelPath(capability=cap, mkl="native", threads=threads) for cap in capabilities if threads > 1]
    return paths


def quick_kernel_paths() -> list[KernelPath]:
    """Each ATen capability once, each with another MKL mode: every axis that changes bits, in a
    quarter of the processes of `kernel_paths()`."""
    every = kernel_paths(threads=1)
    modes = list(dict.fromkeys(p.mkl for p in every))
    capabilities = list(dict.fromkeys(p.capability for p in every))
    wanted = {(cap, modes[i % len(modes)]) for i, cap in enumerate(capabilities)}
    return [p for p in every if (p.capability, p.mkl) in wanted]


def path_seconds() -> float:
    """PATH_SECONDS stretched by the 1-minute load average per core: a loaded machine is slow, not broken
    (at a load of 40 on 2 cores a two-thread path outlasted 300 s)."""
    return PATH_SECONDS * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def run_on_paths(paths: list[KernelPath], engine: str, cases: dict[str, Case], workdir: Path) -> PathRuns:
    """Run `engine` on each case once per kernel path this CPU can run, each path in a fresh process.
    A path is kept once per capability its process reports (a duplicate measures nothing)."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / "job.json"
    job.write_text(json.dumps({"engine": engine, "cases": {key: case.to_json() for key, case in cases.items()}}))
    cannot = unavailable(tuple(dict.fromkeys(p.env["ATEN_CPU_CAPABILITY"] for p in paths)))
    skipped = {p.name: f"not available here: {cannot[p.env['ATEN_CPU_CAPABILITY']]}"
               for p in paths if p.env["ATEN_CPU_CAPABILITY"] in cannot}
    runs: dict[str, PathRun] = {}
    taken: set[tuple] = set()
    for index, path in enumerate(paths):
        if path.name in skipped:
            continue
        out = workdir / f"path-{index}"
        out.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS")} | path.env
        # cwd: a core dump of a path that dies lands in the scratch folder, not in the user's
        limit = path_seconds()
        try:
            done = subprocess.run([*WORKER, str(job), str(out)], env=env, cwd=out, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"kernel path {path.name} did not finish within {limit:.0f} s (load average {os.getloadavg()[0]:.1f} "
                               f"on {os.cpu_count()} cores); run it again on a quieter machine, or with --kernel-paths quick") from None
        if done.returncode == -signal.SIGILL:
            skipped[path.name] = "not available here: its process died of SIGILL (an instruction this CPU lacks, whatever its flags say)"
            continue
        if done.returncode != 0:
            raise RuntimeError(f"kernel path {path.name}: the run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        ran = json.loads((out / "kernel.json").read_text())
        key = (ran["capability"], path.mkl, path.threads)
        if key in taken:
            continue
        taken.add(key)
        runs[path.name] = PathRun(path=path, capability=ran["capability"],
                                  results={name: StepResult.load(out / name) for name in cases})
    return PathRuns(ran=runs, skipped=skipped)
