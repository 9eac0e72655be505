"""What starting a launch costs, per world size: CPU of the whole process tree and wall time, for a launch that builds
the engine and runs one small case, as a pool starts them one after another.

    python benchmarks/launch_start.py [--engine reference] [--launches 5] [--world-sizes 1 2 4]

For each world size: one LaunchPool, `--launches` launches started one after another (each closed after its case),
then the pool closed; CPU is the user + system time of every process the pool started (all reaped by then, so
getrusage(RUSAGE_CHILDREN) holds them), divided by the launches. Runs on any packcheck revision with a LaunchPool:
run it in two checkouts side by side for a comparison (docs/architecture.md, "Launches forked from a zygote").
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import SCENARIOS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_case_per_world_size() -> dict[int, object]:
    setting = setting_for("llama", "float64", "cpu")
    cases = [*SCENARIOS["packed_vs_unpacked"].build(setting).values(), *SCENARIOS["cp_vs_nocp"].build(setting).values()]
    found = {}
    for case in cases:
        found.setdefault(case.parallel.world_size, case)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="reference", help="engine spec (default: reference)")
    parser.add_argument("--launches", type=int, default=5, help="launches per world size (default: 5)")
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2, 4], help="default: 1 2 4")
    args = parser.parse_args()
    cases = one_case_per_world_size()
    for world_size in args.world_sizes:
        walls = []
        cpu_before = children_cpu()
        with LaunchPool(Path(tempfile.mkdtemp(prefix="packcheck-bench-")), timeout=120.0) as pool:
            for _ in range(args.launches):
                started = time.perf_counter()
                outcome = pool.run(args.engine, cases[world_size])
                walls.append(time.perf_counter() - started)
                assert outcome.status == "ok", outcome.describe()
                pool.release(args.engine)
        cpu = (children_cpu() - cpu_before) / args.launches
        print(f"world {world_size}: {cpu:.2f} s of CPU a launch (all processes, one case), wall median {statistics.median(walls):.2f} s "
              f"({', '.join(f'{w:.2f}' for w in walls)}) over {args.launches} launches")


if __name__ == "__main__":
    main()
