"""What isolation costs per arm: starting a launch (an agent and one rank, torch imported, the
engine built) and one case in a warm launch, against the same case's `engine.run` in-process.

    python benchmarks/launch_cost.py [--engine reference] [--repeat 3]

Medians; used for docs/architecture.md, "Isolation cost".
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from packcheck.harness.engines import resolve_engine
from packcheck.harness.launch import Launch
from packcheck.harness.run.scenario_runner import setting_for
from packcheck.harness.scenarios import SCENARIOS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="reference", help="engine spec (default: reference)")
    parser.add_argument("--repeat", type=int, default=3, help="launches to start (default: 3)")
    args = parser.parse_args()
    cases = list(SCENARIOS["packed_vs_unpacked"].build(setting_for("llama", "float64", "cpu")).values())
    starts, in_launch, in_process = [], [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        launch = Launch.start(args.engine, "cpu", 1, 60.0, Path(tempfile.mkdtemp(prefix="packcheck-bench-")))
        launch.engine_info()
        starts.append(time.perf_counter() - started)
        for case in cases * 2:
            started = time.perf_counter()
            outcome = launch.run(case)
            in_launch.append(time.perf_counter() - started)
            assert outcome.status == "ok", outcome.describe()
        launch.close()
    engine = resolve_engine(args.engine)
    for case in cases * 2 * args.repeat:
        started = time.perf_counter()
        engine.run(case)
        in_process.append(time.perf_counter() - started)
    print(f"launch started to engine built (world 1): median {statistics.median(starts):.2f} s over {len(starts)}")
    print(f"one case in a warm launch: median {statistics.median(in_launch):.3f} s over {len(in_launch)}; "
          f"in-process engine.run: median {statistics.median(in_process):.3f} s over {len(in_process)}")


if __name__ == "__main__":
    main()
