"""`packcheck calibrate`: measure a clean engine's noise floor per tolerance field over many seeds.

    packcheck calibrate --engine reference --device cuda --dtype bfloat16 --seeds 0-49 --out reports/cal-bf16
    packcheck calibrate --results reports/cal-bf16 reports/cal-bf16-more --out reports/cal-bf16-all

The first form runs the matrix once per seed (every generated input varies with it: samples,
masks, weights), each seed's results in OUT/seed-N, the engine's launches kept warm across seeds.
The second reads such runs (any `packcheck run --seed N` output) without running anything. Both
write OUT/calibration.json and print, per dtype and tolerance field, how many null comparisons
were measured, their median, 99th percentile and maximum (the floor) with where it occurred, the
tolerance that judged it (the threshold its comparison carries), and the floor x `--factor`, the tolerance
the floor suggests (harness/run/calibration.py says what counts as a null comparison).

The exit status is 1 when any verdict of the runs is not a pass or unsupported: for a clean engine
that is a false positive of today's tolerances (or a bug the seeds exposed), named in the output;
2 on a usage error or when Ctrl-C or SIGTERM stopped it (the seeds it finished are summarised).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from pathlib import Path

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.cli.interrupt import Interrupted, raise_interrupted
from packcheck.harness.cli.run_cmd import add_run_options, checked_choices, output_directory
from packcheck.harness.run.options import NAMED_DTYPES, add_option
from packcheck.harness.run_dir import RunDir

JUDGED_DTYPES = ("float32", "bfloat16", "float64")


def add_parser(commands) -> None:
    parser = commands.add_parser("calibrate", help="measure a clean engine's noise floor per tolerance field over many seeds")
    runs = parser.add_mutually_exclusive_group(required=True)
    runs.add_argument("--seeds", help="the seeds to run: a range 0-49, or a comma list 0,3,7")
    runs.add_argument("--results", nargs="+", help="read these runs' directories (each holding results.json, or seed-N/ folders) instead")
    # --results reads runs: no engine; --seeds gives the seeds; a calibration measures one named dtype (no auto)
    add_run_options(parser, leave_out=("seed", "dtype", "relative_only", "spot_arms", "history"))
    add_option(parser, "dtype", default="float64", means=NAMED_DTYPES)
    parser.add_argument("--factor", type=float, default=None,
                        help="the suggested tolerance is the floor times this (default: the table's CALIBRATION_FACTOR, 4)")
    parser.set_defaults(handler=handle)


def parse_seeds(text: str) -> list[int]:
    try:
        if "-" in text:
            first, last = (int(part) for part in text.split("-", 1))
            seeds = list(range(first, last + 1))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0:
        raise UsageError(f"--seeds {text!r}: give a range like 0-49 or a comma list like 0,3,7 of seeds >= 0")
    return seeds


def handle(args) -> int:
    from packcheck.harness.compare.tolerances import CALIBRATION_FACTOR

    out = output_directory(args.out)
    factor = CALIBRATION_FACTOR if args.factor is None else args.factor
    interrupted = False
    if args.results:
        directories = run_directories(args.results)
    else:
        if not args.engine:
            raise UsageError("--seeds runs an engine: name it with --engine (e.g. --engine reference)")
        if args.dtype not in JUDGED_DTYPES:
            raise UsageError(f"--dtype {args.dtype!r}: calibrate one of {', '.join(JUDGED_DTYPES)}")
        directories, interrupted = run_seeds(args, parse_seeds(args.seeds), out)
    report = summarise(directories, factor)
    RunDir(out).calibration.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(markdown(report))
    print(f"calibration: {RunDir(out).calibration}", file=sys.stderr)
    if interrupted:
        return 2
    return 1 if any(group["not_passing"] for group in report["dtypes"].values()) else 0


handle.launches = True  # main() forks the zygote of its launches first (harness/launch/zygotes.py, prefork)


def run_directories(paths: list[str]) -> list[Path]:
    """Each given run directory, or the seed-N runs under it."""
    found = []
    for path in map(Path, paths):
        found += [run.path for run in RunDir(path).seed_runs()] or [path]
    return found


def run_seeds(args, seeds: list[int], out: Path) -> tuple[list[Path], bool]:
    """Each seed's run in OUT/seed-N, and whether Ctrl-C or SIGTERM stopped them (the seeds finished are kept)."""
    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.provenance import provenance
    from packcheck.harness.run.session import Matrix, run_matrix
    from packcheck.harness.run_dir.results import ResultsFile

    choices = checked_choices(args, seed=seeds[0])
    pool = LaunchPool(RunDir(out).launches, choices.timeout, protect=(Path(out),))
    directories: list[Path] = []
    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for seed in seeds:
            seeded = dataclasses.replace(choices, inputs=dataclasses.replace(choices.inputs, seed=seed))
            print(f"seed {seed} ({seeds.index(seed) + 1} of {len(seeds)})", file=sys.stderr, flush=True)
            results = ResultsFile(RunDir(out).seed_run(seed), provenance(seeded.device, ["packcheck", *args.argv]) | seeded.provenance())
            matrix = Matrix(engines=seeded.engines, families=seeded.families, scenarios=seeded.scenarios, dtype=seeded.dtype,
                            device=seeded.device, attention=seeded.attention, save_arms="none", inputs=seeded.inputs, logic_pass=False,
                            noise_floors=seeded.noise_floors)
            try:
                run_matrix(matrix, results, pool)
            finally:
                results.write()
            directories.append(results.run_dir.path)
        pool.close()
    except (Interrupted, KeyboardInterrupt) as stop:
        pool.kill()
        print(f"packcheck calibrate: interrupted ({stop or 'SIGINT'}) after {len(directories)} whole seeds; every engine "
              "process was killed; the floors below are of those seeds", file=sys.stderr)
        return directories, True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return directories, False


def summarise(directories: list[Path], factor: float) -> dict:
    """Per dtype: the floors, the floors against float64, each arm pair's floor, and the verdicts that did not pass."""
    from packcheck.harness.judging.status import counts_as_failed
    from packcheck.harness.run import calibration
    from packcheck.harness.run_dir.results import load_results

    measured: dict[str, dict] = {}
    for directory in directories:
        data = load_results(RunDir(directory))
        seed = int(data["provenance"].get("inputs", {}).get("seed", 0))
        for dtype in sorted({v["dtype"] for v in data["verdicts"]}):
            group = measured.setdefault(dtype, {"judged": [], "oracle": [], "seeds": set(), "verdicts": 0, "not_passing": []})
            rows = [r for r in data["rows"] if r.get("dtype") == dtype]
            judged, oracle = calibration.samples(rows, seed)
            group["judged"] += judged
            group["oracle"] += oracle
            group["seeds"].add(seed)
            verdicts = [v for v in data["verdicts"] if v["dtype"] == dtype]
            group["verdicts"] += len(verdicts)
            group["not_passing"] += [f"seed {seed}: {v['message']}" for v in verdicts if counts_as_failed(v["status"])]
    return {"factor": factor, "runs": [str(d) for d in directories],
            "dtypes": {dtype: dtype_report(group, factor) for dtype, group in measured.items()}}


def dtype_report(group: dict, factor: float) -> dict:
    from packcheck.harness.run import calibration

    fields = {}
    for field, floor in calibration.floors(group["judged"]).items():
        allowed = floor.tolerance
        fields[field] = floor.to_json() | {"tolerance": allowed, "max_over_tolerance": floor.floor / allowed if allowed else None,
                                           "suggested": factor * floor.floor}
    return {"seeds": sorted(group["seeds"]), "verdicts": group["verdicts"], "not_passing": group["not_passing"], "fields": fields,
            "against_float64": {f: floor.to_json() for f, floor in calibration.floors(group["oracle"]).items()},
            "families": calibration.family_floors(group["judged"]), "arm_pairs": calibration.arm_pair_floors(group["judged"])}


def markdown(report: dict) -> str:
    lines = []
    for dtype, group in report["dtypes"].items():
        seeds = group["seeds"]
        lines += [f"## {dtype}: {len(seeds)} seeds ({seeds[0]}..{seeds[-1]}), {group['verdicts']} verdicts, "
                  f"{len(group['not_passing'])} not passing", "",
                  "| field | comparisons | median | p99 | max (floor) | tolerance | max / tolerance | floor x factor | where the max was |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for field, f in group["fields"].items():
            ratio = "-" if f["max_over_tolerance"] is None else f"{f['max_over_tolerance']:.3g}"
            lines.append(f"| {field} | {f['count']} | {f['median']:.3g} | {f['p99']:.3g} | {f['max']:.3g} | {f['tolerance']:.3g} | "
                         f"{ratio} | {f['suggested']:.3g} | {f['worst']} |")
        lines += ["", "per family (max):", ""]
        lines += [f"- {field}: " + ", ".join(f"{family} {value:.2g}" for family, value in families.items())
                  for field, families in group["families"].items()]
        if group["against_float64"]:
            lines += ["", "against the float64 oracle (the engine's own error):", ""]
            lines += [f"- {field}: {f['count']} comparisons, median {f['median']:.3g}, max {f['max']:.3g} ({f['worst']})"
                      for field, f in group["against_float64"].items()]
        lines += [""] + [f"- not passing: {line}" for line in group["not_passing"][:20]] + [""]
    return "\n".join(lines)
