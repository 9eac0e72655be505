"""Wall time of a `packcheck run` matrix, a baseline installation against a candidate, side by side.

    python benchmarks/matrix_wall_time.py --baseline /path/old-venv/bin/packcheck \
        --candidate .venv/bin/packcheck --repeat 3 -- --engine reference

Runs alternate (baseline, candidate, baseline, ...) so that a change in the machine's load hits
both alike; prints every run, the medians, and the candidate's ratio to the baseline. Each run
writes to a fresh temporary --out with --no-report; the exit status of each run is shown (1 is
a failing verdict, not a failed measurement). Used for docs/architecture.md, "Isolation cost".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time


def one_run(packcheck: str, args: list[str]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="packcheck-bench-") as out:
        started = time.perf_counter()
        done = subprocess.run([packcheck, "run", *args, "--no-report", "--out", out], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
        return time.perf_counter() - started, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the baseline's packcheck executable")
    parser.add_argument("--candidate", required=True, help="the candidate's packcheck executable")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (default: 3)")
    parser.add_argument("run_args", nargs="+", help="arguments of `packcheck run` (after --)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"baseline": [], "candidate": []}
    print(f"load average before: {os.getloadavg()[0]:.2f}; packcheck run {' '.join(args.run_args)}")
    for index in range(args.repeat):
        for name, packcheck in (("baseline", args.baseline), ("candidate", args.candidate)):
            seconds, status = one_run(packcheck, args.run_args)
            times[name].append(seconds)
            print(f"  run {index + 1} {name:9s} {seconds:7.1f} s  (exit {status})", flush=True)
    base, cand = statistics.median(times["baseline"]), statistics.median(times["candidate"])
    print(f"median baseline {base:.1f} s, candidate {cand:.1f} s: ratio {cand / base:.3f}")


if __name__ == "__main__":
    main()
