"""Could a rank's work be proven from outside its process? Each rank's CPU seconds and bytes written, per arm and engine.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/outside_work.py [--repeat 5]   # from the repository root: it runs tests/engines

Runs dp_cp_reduction's single, dp2 and dp1 x cp2 (ulysses) arms on llama, float64, two gloo ranks, with the reference
(runs on its mesh), IgnoresMeshQuietly (every rank computes the whole batch, empty collectives), the forger of
tests/engines/hostile.py that also all-reduces a tensor of its gradients' size (the bytes an honest data-parallel rank
sends), and AllReducesLoss (tests/engines/distributed.py: also the whole batch on each rank). Around each `engine.run`
a rank reads what another process could read of it in /proc: its CPU time (as `time.process_time`) and `wchar` of
/proc/self/io, which counts the bytes of its socket writes. Medians, min and max over `--repeat` runs after one warm-up.
What it showed is in docs/distributed.md ("The token meter").
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.engines.hostile import ForgesTokenMeter

ARMS = ("single", "dp2_cp1_uneven", "dp1_cp2_ulysses")


class ForgesTokenMeterAndTraffic(ForgesTokenMeter):
    """The forger, also sending what an honest data-parallel rank sends: an all_reduce of its gradients' size."""

    name = "hostile.forges-token-meter-and-traffic"

    def run(self, case):
        result = super().run(case)
        count = torch.tensor([sum(g.numel() for g in result.grads.values()) if result is not None else 0])
        dist.broadcast(count, 0)
        dist.all_reduce(torch.zeros(int(count), dtype=torch.float64))
        return result


def _engines() -> list:
    from packcheck.impls.reference.engine import ReferenceEngine
    from tests.engines.distributed import AllReducesLoss
    from tests.engines.hostile import IgnoresMeshQuietly

    return [ReferenceEngine, IgnoresMeshQuietly, ForgesTokenMeterAndTraffic, AllReducesLoss]


def _written() -> int:
    with open("/proc/self/io") as io:
        return int(dict(line.split(": ") for line in io.read().splitlines())["wchar"])


def _rank(rank: int, cases: dict, repeat: int, port: int, rows) -> None:
    from packcheck.harness.contract import Case

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    dist.init_process_group("gloo")
    for engine_class in _engines():
        engine = engine_class()
        for arm, data in cases.items():
            case = Case.from_json(data)
            for run in range(repeat + 1):  # the first is a warm-up
                dist.barrier()
                cpu, written = time.process_time(), _written()
                engine.run(case)  # both ranks run the single-process arm too: the reference builds its groups on every rank
                if run:
                    rows.append((engine_class.__name__, arm, rank, time.process_time() - cpu, _written() - written))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="measured runs per engine and arm (default 5)")
    args = parser.parse_args()
    from packcheck.harness.run.inputs import Inputs
    from packcheck.harness.scenarios import SCENARIOS

    arms = SCENARIOS["dp_cp_reduction"].build(Inputs().setting("llama", "float64", "cpu"))
    rows = mp.Manager().list()
    mp.spawn(_rank, args=({a: arms[a].to_json() for a in ARMS}, args.repeat, 29500 + os.getpid() % 500, rows), nprocs=2)
    groups = defaultdict(list)
    for engine, arm, rank, cpu, written in rows:
        groups[engine, arm, rank].append((cpu, written))
    for (engine, arm, rank), values in sorted(groups.items()):
        cpu, written = [v[0] for v in values], [v[1] / 1e3 for v in values]
        print(f"{engine:28s} {arm:16s} rank {rank}  CPU s median {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})"
              f"  written kB median {statistics.median(written):.1f} ({min(written):.1f}-{max(written):.1f})")


if __name__ == "__main__":
    main()
