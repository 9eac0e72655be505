"""`packcheck run`: run scenarios against engines, write results.json and report.html.

Every arm runs in the engine's own processes (harness/launch), so the exit status depends only on
the verdicts and on packcheck's own errors: 0 every supported case passes, 1 a case fails, errs
or hangs, 2 a usage error, an engine spec that resolves to nothing, every case unsupported, or an
interrupted run. Ctrl-C or SIGTERM stops the run: every engine process is killed, and the
verdicts so far are kept in results.json and the report.
"""

from __future__ import annotations

import fnmatch
import signal
import sys
from collections import Counter
from pathlib import Path

from packcheck.harness.cli.errors import UsageError


def add_parser(commands) -> None:
    parser = commands.add_parser("run", help="run scenarios against one or more engines")
    add_matrix_options(parser)
    parser.add_argument("--save-arms", choices=("failing", "all", "none"), default="failing",
                        help="keep each arm's case and full result under OUT/cases for failing verdicts, all, or none (default: failing)")
    parser.add_argument("--no-report", action="store_true", help="skip report.html (default: write it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every generated input, weights included; 0 is the goldens' (default: 0)")
    parser.set_defaults(handler=handle)


def add_matrix_options(parser, engine_required: bool = True) -> None:
    """The options that say what a matrix runs: engines, families, scenarios, dtype, device, model and data (run, calibrate)."""
    parser.add_argument("--engine", nargs="+", required=engine_required,
                        help="engine names, glob patterns ('mutant.*') or 'package.module:Class'")
    parser.add_argument("--family", nargs="+", default=None, help="model families (default: every family the engine supports)")
    parser.add_argument("--scenario", nargs="+", default=None, help="scenarios (default: all)")
    parser.add_argument("--dtype", default="float64",
                        help="float64 | float32 | bfloat16 | auto: per engine, the most precise dtype its Capabilities.dtypes declare "
                             "(default: float64)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda (default: cpu)")
    parser.add_argument("--attention", default="auto", help="attention backend every case asks for (default: auto, the engine's choice)")
    parser.add_argument("--out", default="reports/latest", help="output directory (default: reports/latest)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one arm may run on a rank before it is reported as hung; the run goes on (default: 600)")
    parser.add_argument("--model", default="tiny",
                        help="a size preset of each family (tiny, 0.6b, 1b: `packcheck list families`) or a directory holding a "
                             "Hugging Face config.json, with its safetensors or seeded weights (default: tiny)")
    parser.add_argument("--data-scale", type=int, default=None,
                        help="documents and packed rows this many times longer, odd (default: the model's: 1 for tiny, 85 for 0.6b/1b)")
    parser.add_argument("--noise-floors", default=None, metavar="CALIBRATION_JSON",
                        help="judge float32/bfloat16 with 4x the floors `packcheck calibrate` measured on your model and machine "
                             "(its calibration.json) instead of the shipped ones (default: the shipped, docs/gpu.md)")


def expand_engines(specs: list[str]) -> list[str]:
    from packcheck.harness.engines import engine_names

    names: list[str] = []
    for spec in specs:
        if any(ch in spec for ch in "*?[") and ":" not in spec:
            matched = fnmatch.filter(engine_names(), spec)
            if not matched:
                raise UsageError(f"engine pattern {spec!r} matches no registered engine")
            names += matched
        else:
            names.append(spec)
    return list(dict.fromkeys(names))


def output_directory(out: str) -> Path:
    """--out as an absolute path (an engine cannot move it), created and writable, or a usage error."""
    path = Path(out).resolve()
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out}: is a file, not a directory; point --out at a directory (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".packcheck-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UsageError(f"--out {out}: cannot write there ({err.strerror}); choose a writable directory") from None
    return path


def auto_dtypes(engines: list[str], pool, device: str) -> dict:
    """--dtype auto: each engine's choice (harness/run/dtype_choice.py), printed; an engine that does not start is
    left to the run, which reports it; one that declares no dtype is a usage error naming the field."""
    from packcheck.harness.launch import LaunchFailed
    from packcheck.harness.run.dtype_choice import NoDtypeDeclared, choose_dtype

    chosen = {}
    for spec in engines:
        try:
            info = pool.engine_info(spec, device)
        except LaunchFailed:
            continue
        try:
            chosen[spec] = choose_dtype(info.name, info.capabilities)
        except NoDtypeDeclared as err:
            pool.close()
            raise UsageError(str(err)) from None
        print(f"engine {info.name}: dtype {chosen[spec].dtype} ({chosen[spec].why})", file=sys.stderr, flush=True)
    return chosen


def checked_inputs(args):
    """--model, --seed and --data-scale as the run's Inputs (harness/run/inputs.py), `args.family` narrowed to the
    families they fit; what no run can take is a usage error."""
    from packcheck.harness.errors import InputError
    from packcheck.harness.run.inputs import checked_inputs as checked

    try:
        inputs, args.family = checked(args.model, args.seed, args.data_scale, args.family)
    except InputError as err:
        raise UsageError(str(err)) from None
    return inputs


def checked_floors(args) -> dict:
    """--noise-floors read (a usage error names the file and the entry), or {} for the shipped floors."""
    from packcheck.harness.run.calibration import FloorsProblem, floors_from_report

    if args.noise_floors is None:
        return {}
    try:
        return floors_from_report(args.noise_floors)
    except FloorsProblem as err:
        raise UsageError(str(err)) from None


def floors_provenance(args, floors: dict) -> dict:
    """The table a run with its own --noise-floors judges with, and where the floors came from."""
    from packcheck.harness.compare.tolerances import table_json

    return {"tolerances": table_json(floors), "noise_floors": str(Path(args.noise_floors).resolve())} if floors else {}


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop the run, keep what it judged."""


def raise_interrupted(signum, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def checked_matrix(args) -> tuple[list[str], list]:
    """--device, --timeout, --engine, --family and --scenario checked: the engine specs and the scenarios to run."""
    from packcheck.harness.engines import engine_names, unknown_engine
    from packcheck.harness.models import get_family
    from packcheck.harness.scenarios import SCENARIOS, get_scenario

    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r}: use cpu or cuda")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout:g}: give the seconds an arm may run, a positive number")
    engines = expand_engines(args.engine)
    known = set(engine_names())
    for spec in engines:
        if ":" not in spec and spec not in known:
            raise UsageError(f"--engine {spec}: {unknown_engine(spec, known)}")
    for family in args.family or ():
        get_family(family)
    return engines, [get_scenario(name) for name in args.scenario] if args.scenario else list(SCENARIOS.values())


def handle(args) -> int:
    from packcheck.harness.contract import DTYPES
    from packcheck.harness.launch import LaunchPool
    from packcheck.harness.provenance import provenance
    from packcheck.harness.run.dtype_choice import AUTO
    from packcheck.harness.run.results import ResultsFile
    from packcheck.harness.run.conclusion import first_error_line
    from packcheck.harness.run.session import Matrix, exit_status, run_matrix, where_arms_ran

    if args.dtype not in (*DTYPES, AUTO):
        raise UsageError(f"--dtype {args.dtype!r} is not one of {', '.join(DTYPES)}, {AUTO}")
    engines, scenarios = checked_matrix(args)
    out = output_directory(args.out)
    inputs = checked_inputs(args)
    floors = checked_floors(args)
    pool = LaunchPool(out / "launches", args.timeout)
    chosen = auto_dtypes(engines, pool, args.device) if args.dtype == AUTO else {}
    results = ResultsFile(out, provenance(args.device, ["packcheck", *args.argv]) | {"dtype": args.dtype, "inputs": inputs.to_json()}
                          | floors_provenance(args, floors)
                          | ({"dtype_choice": {spec: f"{c.dtype} ({c.why})" for spec, c in chosen.items()}} if chosen else {}))
    matrix = Matrix(engines=engines, families=args.family, scenarios=scenarios, dtype=args.dtype, device=args.device,
                    attention=args.attention, save_arms=args.save_arms, dtype_for={spec: c.dtype for spec, c in chosen.items()},
                    inputs=inputs, noise_floors=floors)
    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = None
    try:
        run_matrix(matrix, results, pool)
        pool.close()
    except (Interrupted, KeyboardInterrupt) as stop:
        interrupted = str(stop) or "SIGINT"
        pool.kill()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        results.write()
        if not args.no_report and results.verdicts:
            from packcheck.harness.report import write_html

            write_html(out, out / "report.html")
            print(f"report:  {out / 'report.html'}", file=sys.stderr)
    verdicts = matrix.verdicts
    counts = {status: sum(v.status == status for v in verdicts) for status in ("pass", "fail", "error", "hang", "unsupported")}
    print(f"{len(verdicts)} verdicts: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f"\nresults: {results.path}", file=sys.stderr)
    if where_arms_ran(verdicts):
        print(where_arms_ran(verdicts), file=sys.stderr)
    if interrupted:
        print(f"packcheck run: interrupted ({interrupted}) after {len(verdicts)} verdicts; every engine process was killed, "
              "the verdicts so far are in the results and the report", file=sys.stderr)
        return 2
    if matrix.unresolved:
        print(f"packcheck run: error: --engine {', '.join(matrix.unresolved)} does not resolve to an engine: "
              + first_error_line(matrix.not_started[matrix.unresolved[0]].text), file=sys.stderr)
        return 2
    if verdicts and counts["unsupported"] == len(verdicts):
        reason, times = Counter(v.reason for v in verdicts).most_common(1)[0]
        print(f"packcheck run: error: every case was unsupported by the engine: nothing was tested. Most common reason "
              f"({times} of {len(verdicts)}): {reason}", file=sys.stderr)
        return 2
    return exit_status(verdicts)
