"""`packcheck run`: run scenarios against engines, write results.json and report.html."""

from __future__ import annotations

import fnmatch
from collections import Counter
import sys
from pathlib import Path

from packcheck.harness.cli.errors import UsageError


def add_parser(commands) -> None:
    parser = commands.add_parser("run", help="run scenarios against one or more engines")
    parser.add_argument("--engine", nargs="+", required=True,
                        help="engine names, glob patterns ('mutant.*') or 'package.module:Class'")
    parser.add_argument("--family", nargs="+", default=None, help="model families (default: every family the engine supports)")
    parser.add_argument("--scenario", nargs="+", default=None, help="scenarios (default: all)")
    parser.add_argument("--dtype", default="float64", help="float64 | float32 | bfloat16 (default: float64)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda (default: cpu)")
    parser.add_argument("--attention", default="auto", help="attention backend every case asks for (default: auto, the engine's choice)")
    parser.add_argument("--out", default="reports/latest", help="output directory (default: reports/latest)")
    parser.add_argument("--save-arms", choices=("failing", "all", "none"), default="failing",
                        help="keep each arm's case and full result under OUT/cases for failing verdicts, all, or none (default: failing)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds one verdict may take before it is reported as hung and the run stops (default: 600; 0: no limit)")
    parser.add_argument("--no-report", action="store_true", help="skip report.html (default: write it)")
    parser.set_defaults(handler=handle)


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


def handle(args) -> int:
    from packcheck.harness.contract import DTYPES
    from packcheck.harness.engines import resolve_engine
    from packcheck.harness.models import FAMILIES, get_family
    from packcheck.harness.provenance import provenance
    from packcheck.harness.run.results import ResultsFile
    from packcheck.harness.run.session import Matrix, exit_status, run_matrix, unsupported_reason
    from packcheck.harness.scenarios import SCENARIOS, get_scenario

    if args.dtype not in DTYPES:
        raise UsageError(f"--dtype {args.dtype!r} is not one of {', '.join(DTYPES)}")
    if args.device not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r}: use cpu or cuda")
    engines = [resolve_engine(name) for name in expand_engines(args.engine)]
    families = args.family or sorted(set(FAMILIES) & set().union(*(e.capabilities.families for e in engines)))
    for family in families:
        get_family(family)
    scenarios = [get_scenario(name) for name in args.scenario] if args.scenario else list(SCENARIOS.values())
    out = Path(args.out)
    results = ResultsFile(out, provenance(args.device, ["packcheck", *args.argv]))
    matrix = Matrix(engines=engines, families=families, scenarios=scenarios, dtype=args.dtype, device=args.device, attention=args.attention,
                    save_arms=args.save_arms, timeout=args.timeout)

    def write_report() -> None:
        if not args.no_report and results.verdicts:
            from packcheck.harness.report import write_html

            write_html(out, out / "report.html")
            print(f"report:  {out / 'report.html'}", file=sys.stderr)

    try:
        verdicts = run_matrix(matrix, results, on_abort=write_report)
    finally:
        write_report()
    counts = {status: sum(v.status == status for v in verdicts) for status in ("pass", "fail", "error", "unsupported")}
    print(f"{len(verdicts)} verdicts: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f"\nresults: {results.path}", file=sys.stderr)
    if counts["unsupported"] == len(verdicts):
        reason, times = Counter(unsupported_reason(v) for v in verdicts).most_common(1)[0]
        print(f"packcheck run: error: every case was unsupported by the engine: nothing was tested. Most common reason "
              f"({times} of {len(verdicts)}): {reason}", file=sys.stderr)
        return 2
    return exit_status(verdicts)
