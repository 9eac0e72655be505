"""`packcheck golden regen|verify|show [--family F ...] [--kernel-paths all|quick|native]`: the only way
goldens change, and the check that they hold on every CPU.

regen writes the float64 golden from this process and measures, on every CPU kernel path of the
machine (harness/golden/kernel_paths.py), how far the same run lands from it (refusing a golden
that is not portable) and the float32 / bfloat16 noise floors (the worst path's). verify judges
the reference against the stored golden here, or with `--kernel-paths all` on every kernel path.
Paths this CPU cannot run (an ATen capability it lacks) are skipped, each with its reason; the
summary says which ran and which were skipped; a request that no path can serve is an error (exit 2).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from packcheck.harness.cli.errors import UsageError

NOISE_DTYPES = ("float32", "bfloat16")


def add_parser(commands) -> None:
    parser = commands.add_parser("golden", help="regenerate, verify or show the reference's float64 goldens")
    parser.add_argument("action", choices=("regen", "verify", "show"))
    parser.add_argument("--family", nargs="+", default=None, help="families (default: every family the reference supports)")
    parser.add_argument("--kernel-paths", choices=("all", "quick", "native"), default=None,
                        help="all: run on every CPU kernel path of this machine (ATen capability x MKL mode x threads), each in "
                             "its own process; quick: each ATen capability once, with another MKL mode each; native: only in this "
                             "process (default: all for regen, native for verify)")
    parser.add_argument("--json", default=None, help="verify: write every kernel path's margins to this file (default: none)")
    parser.set_defaults(handler=handle)


def golden_cases(families: list[str]) -> dict:
    from packcheck.harness.run.scenario_runner import setting_for
    from packcheck.harness.scenarios import get_scenario

    scenario = get_scenario("golden_regression")
    return {family: next(iter(scenario.build(setting_for(family, "float64", "cpu")).values())) for family in families}


def handle(args) -> int:
    from packcheck.harness.engines import resolve_engine

    reference = resolve_engine("reference")
    families = args.family or sorted(reference.capabilities.families)
    unknown = sorted(set(families) - reference.capabilities.families)
    if unknown:
        raise UsageError(f"--family {' '.join(unknown)}: the reference has no golden for it (families: {', '.join(sorted(reference.capabilities.families))})")
    if args.action == "show":
        return show(families)
    if args.action == "regen":
        return regen(reference, families, paths=args.kernel_paths or "all")
    return verify(reference, families, paths=args.kernel_paths or "native", json_path=args.json)


def show(families: list[str]) -> int:
    from packcheck.harness.golden import golden_path

    for family in families:
        path = golden_path(family) / "provenance.json"
        print(f"{family}: " + (path.read_text() if path.exists() else "no golden"))
    return 0


def regen(reference, families: list[str], paths: str) -> int:
    from packcheck.harness.compare import tolerance_for
    from packcheck.harness.engines import validate_result
    from packcheck.harness.golden import measure_floor, write_golden
    from packcheck.harness.golden.noise_floor import worst_floor
    from packcheck.harness.golden.portability import PORTABLE_MARGIN, golden_key, spread
    from packcheck.harness.provenance import provenance

    cases = golden_cases(families)
    goldens = {family: validate_result(reference.name, case, reference.run(case)) for family, case in cases.items()}
    every_dtype = {golden_key(family, dtype): case.with_(dtype=dtype) for family, case in cases.items() for dtype in ("float64", *NOISE_DTYPES)}
    paths_run = None if paths == "native" else on_kernel_paths(reference, every_dtype, paths)
    runs = paths_run.ran if paths_run else None
    results = [run.results for run in runs.values()] if runs else [{key: reference.run(case) for key, case in every_dtype.items()}]
    status = 0
    for family, case in cases.items():
        golden = goldens[family]
        floors = {dtype: worst_floor([measure_floor(by_key[golden_key(family, dtype)], golden, case.optimizer) for by_key in results])
                  for dtype in NOISE_DTYPES}
        record = {"engine": reference.name, "noise_floor": floors}
        if runs:
            worst = max(spread(runs, {golden_key(family): (case, golden)}, tolerance_for("float64")), key=lambda s: s.worst.margin)
            record |= {"kernel_paths": sorted(runs), "skipped_kernel_paths": paths_run.skipped,
                       "capabilities": sorted({run.capability for run in runs.values()}),
                       "float64_spread": {"worst_margin": worst.worst.margin, "worst": worst.line()}}
            if not worst.portable:
                print(f"{family}: NOT written: on kernel path {worst.path} the same run lands at margin {worst.worst.margin:.2g} "
                      f"(>= {PORTABLE_MARGIN:g}) from this process's result, so the golden would not hold on other CPUs:\n  "
                      f"{worst.line()}", file=sys.stderr)
                status = 1
                continue
        path = write_golden(family, case, golden, provenance("cpu") | record)
        measured = (f"float64 spread over {len(runs)} kernel paths ({', '.join(record['capabilities'])}): worst margin "
                    f"{record['float64_spread']['worst_margin']:.2g}" if runs else "floors measured in this process only")
        print(f"{family}: wrote {path} ({measured}); review the diff before committing")
    if paths_run:
        print(f"kernel paths: {paths_run.summary()}", file=sys.stderr)
    return status


def on_kernel_paths(reference, cases: dict, paths: str):
    """Every chosen path this CPU can run (a PathRuns); each skipped one named on stderr with its reason."""
    from packcheck.harness.golden.kernel_paths import kernel_paths, quick_kernel_paths, run_on_paths

    chosen = quick_kernel_paths() if paths == "quick" else kernel_paths()
    with tempfile.TemporaryDirectory(prefix="packcheck-kernel-paths-") as scratch:
        runs = run_on_paths(chosen, reference.name, cases, Path(scratch))
    for name, reason in runs.skipped.items():
        print(f"skip {name}: {reason}", file=sys.stderr, flush=True)
    if not runs.ran:
        raise UsageError(f"--kernel-paths {paths}: no kernel path can run on this CPU ({runs.summary()}); "
                         f"use --kernel-paths native (this process's own path)")
    return runs


def verify(reference, families: list[str], paths: str, json_path: str | None) -> int:
    from packcheck.harness.compare import tolerance_for
    from packcheck.harness.golden import GoldenProblem, load_golden
    from packcheck.harness.golden.portability import PORTABLE_MARGIN, golden_key, spread
    from packcheck.harness.run.scenario_runner import run_scenario
    from packcheck.harness.scenarios import get_scenario

    if paths == "native":
        status = 0
        for family in families:
            verdict = run_scenario(reference, get_scenario("golden_regression"), family)
            print(verdict.message())
            status = max(status, 1 if verdict.failed else 0)
        return status
    cases = {golden_key(family): case for family, case in golden_cases(families).items()}
    try:
        goldens = {key: (case, load_golden(case.model.family, case)) for key, case in cases.items()}
    except GoldenProblem as problem:
        print(f"packcheck golden verify: {problem}", file=sys.stderr)
        return 1
    paths_run = on_kernel_paths(reference, cases, paths)
    runs = paths_run.ran
    spreads = spread(runs, goldens, tolerance_for("float64"))
    for s in spreads:
        print(("ok   " if s.portable else "FAIL ") + s.line(), flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps([{"path": s.path, "capability": s.capability, "key": s.key, "worst": s.worst.to_json(),
                                                "by_quantity": s.by_quantity()} for s in spreads], indent=1))
    bad = [s for s in spreads if not s.portable]
    capabilities = sorted({s.capability for s in spreads})
    print(f"{len(runs)} kernel paths ({', '.join(capabilities)}) x {len(families)} families: "
          + (f"{len(bad)} at a margin >= {PORTABLE_MARGIN:g}" if bad else f"every margin below {PORTABLE_MARGIN:g}")
          + f" ({paths_run.summary()})", file=sys.stderr)
    return 1 if bad else 0
