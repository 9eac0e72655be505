"""Wall time of a `packcheck run` matrix, a baseline installation against a candidate, side by side.

    python benchmarks/matrix_wall_time.py --baseline /path/old-venv/bin/packcheck \
        --candidate .venv/bin/packcheck --repeat 3 -- --engine reference

Runs alternate (baseline, candidate, baseline, ...) so that a change in the machine's load hits
both alike; prints every run (wall time, the CPU of its whole process tree, user and system, and its
voluntary context switches), the medians, and the candidate's ratio to the baseline. Each run
writes to a fresh temporary --out with --no-report; the exit status of each run is shown (1 is
a failing verdict, not a failed measurement). Used for docs/architecture.md, "Isolation cost".
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time


FIELDS = ("wall", "user", "system", "switches")


def one_run(packcheck: str, args: list[str]) -> tuple[dict[str, float], int]:
    """The run's wall seconds, and its process tree's user and system CPU seconds and voluntary context switches
    (every process of a run is waited for by its parent, so the tree's usage reaches this process's children's)."""
    with tempfile.TemporaryDirectory(prefix="packcheck-bench-") as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([packcheck, "run", *args, "--no-report", "--out", out], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {"wall": wall, "user": after.ru_utime - before.ru_utime, "system": after.ru_stime - before.ru_stime,
                "switches": after.ru_nvcsw - before.ru_nvcsw}, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the baseline's packcheck executable")
    parser.add_argument("--candidate", required=True, help="the candidate's packcheck executable")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default: 3)")
    parser.add_argument("run_args", nargs="+", help="arguments of `packcheck run` (after --)")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "candidate": []}
    print(f"load average before: {os.getloadavg()[0]:.2f}; packcheck run {' '.join(args.run_args)}")
    for index in range(args.repeat):
        for name, packcheck in (("baseline", args.baseline), ("candidate", args.candidate)):
            usage, status = one_run(packcheck, args.run_args)
            runs[name].append(usage)
            print(f"  run {index + 1} {name:9s} {usage['wall']:7.1f} s wall, {usage['user']:7.1f} s user, {usage['system']:7.1f} s system,"
                  f" {usage['switches'] / 1e6:6.2f} M voluntary switches  (exit {status})", flush=True)
    for field in FIELDS:
        base, cand = (statistics.median(run[field] for run in runs[name]) for name in ("baseline", "candidate"))
        print(f"median {field:8s} baseline {base:12.1f}, candidate {cand:12.1f}: ratio {cand / base:.3f}")


if __name__ == "__main__":
    main()
