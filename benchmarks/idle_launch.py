"""What a warm launch costs while it waits for cases: the CPU of its agent and ranks over an idle interval.

    python benchmarks/idle_launch.py [--engine reference] [--world-size 4] [--seconds 10] [--repeat 3]

A pool keeps up to three launches per engine warm (harness/launch/pool.py), most of the time idle while
other launches run; whatever they burn polling is taken from the arms that run. Medians of the CPU share
(100% = one core) over `--repeat` launches; CPU read from /proc for the launch's whole process tree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from packcheck.harness.launch import Launch

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of `root` and every live descendant (children reaped by them included)."""
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append((int(entry), fields))
    total, stack = 0.0, [root]
    while stack:
        for pid, fields in children.get(stack.pop(), []):
            total += sum(int(x) for x in fields[11:15]) / TICKS
            stack.append(pid)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="reference", help="engine spec (default: reference)")
    parser.add_argument("--world-size", type=int, default=4, help="ranks of the launch (default: 4)")
    parser.add_argument("--seconds", type=float, default=10.0, help="idle interval measured (default: 10)")
    parser.add_argument("--repeat", type=int, default=3, help="launches to measure (default: 3)")
    args = parser.parse_args()
    shares = []
    for _ in range(args.repeat):
        launch = Launch.start(args.engine, "cpu", args.world_size, 60.0, Path(tempfile.mkdtemp(prefix="packcheck-bench-")))
        launch.engine_info()
        time.sleep(2.0)  # past start-up, and past the ranks' back-off
        before, started = tree_cpu_seconds(os.getpid()), time.monotonic()
        time.sleep(args.seconds)
        shares.append((tree_cpu_seconds(os.getpid()) - before) / (time.monotonic() - started))
        launch.close()
    print(f"idle world-{args.world_size} launch of {args.engine}: median {100 * statistics.median(shares):.1f}% of a core "
          f"({', '.join(f'{100 * s:.1f}%' for s in shares)}) over {args.seconds:g} s")


if __name__ == "__main__":
    main()
