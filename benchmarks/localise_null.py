"""Localisation's null check and its cost: two arms of a clean engine, re-run with activation capture, must part nowhere;
an engine with a known bug must part where the bug is. Prints each point's error against the bound and the seconds.

    python benchmarks/localise_null.py [--engine reference] [--family qwen3] [--scenario packed_vs_unpacked]
        [--arms packed unpacked] [--device cuda] [--dtype bfloat16] [--model 0.6b] [--timeout 600]

At float64 on the CPU the bound is 1e-10 (the reference's tiny arms agree to 1e-15). In float32 and bfloat16 the bound
is the dtype's calibrated relative-L2 bound of a gradient (harness/run/localise.py): this measures whether a clean
engine's packed and unpacked activations stay within it at a real size, and how long the capture takes there.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from packcheck.harness.compare import ArmId
from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.localise import localise
from packcheck.harness.scenarios import get_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="reference")
    parser.add_argument("--family", default="qwen3")
    parser.add_argument("--scenario", default="packed_vs_unpacked")
    parser.add_argument("--arms", nargs=2, default=["packed", "unpacked"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    setting = Inputs(model=args.model).setting(args.family, args.dtype, args.device)
    with tempfile.TemporaryDirectory(prefix="localise-null-") as work, LaunchPool(Path(work), args.timeout) as pool:
        engine = pool.engine_info(args.engine, args.device)
        started = time.perf_counter()
        found = localise(engine, get_scenario(args.scenario), setting, ArmId(args.arms[0]), ArmId(args.arms[1]), pool)
        wall = time.perf_counter() - started
    print(found.sentence())
    for name, trail in (("forward", found.forward), ("backward", found.backward)):
        worst = max(trail, key=lambda p: p.error, default=None)
        if worst is not None:
            print(f"{name}: {len(trail)} points, worst {worst.error:.3g} at {worst.label} (bound {found.threshold:.3g}, "
                  f"{worst.error / found.threshold:.3g} of it)")
    print(f"{found.tokens} shared tokens; localisation {found.seconds:.1f} s ({wall:.1f} s with the launches' start-up)")


if __name__ == "__main__":
    main()
