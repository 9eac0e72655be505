"""`packcheck golden regen|verify|show [--family F ...]`: the only way goldens change."""

from __future__ import annotations

import json

NOISE_DTYPES = ("float32", "bfloat16")


def add_parser(commands) -> None:
    parser = commands.add_parser("golden", help="regenerate, verify or show the reference's float64 goldens")
    parser.add_argument("action", choices=("regen", "verify", "show"))
    parser.add_argument("--family", nargs="+", default=None, help="families (default: every family the reference supports)")
    parser.set_defaults(handler=handle)


def handle(args) -> int:
    from harness.engines import resolve_engine, validate_result
    from harness.golden import golden_path, measure_floor, write_golden
    from harness.run.provenance import provenance
    from harness.run.scenario_runner import run_scenario, setting_for
    from harness.scenarios import get_scenario

    reference = resolve_engine("reference")
    families = args.family or sorted(reference.capabilities.families)
    scenario = get_scenario("golden_regression")
    status = 0
    for family in families:
        if args.action == "show":
            path = golden_path(family) / "provenance.json"
            print(f"{family}: " + (path.read_text() if path.exists() else "no golden"))
        elif args.action == "regen":
            (arm_name, case), = scenario.build(setting_for(family, "float64", "cpu")).items()
            result = validate_result(reference.name, case, reference.run(case))
            floors = {dtype: measure_floor(reference.run(case.with_(dtype=dtype)), result) for dtype in NOISE_DTYPES}
            path = write_golden(family, case, result, provenance("cpu") | {"engine": reference.name, "noise_floor": floors})
            print(f"{family}: wrote {path} (case {json.loads((path / 'provenance.json').read_text())['case_digest']}); review the diff before committing")
        else:
            verdict = run_scenario(reference, scenario, family)
            print(verdict.message())
            status = max(status, 1 if verdict.failed else 0)
    return status
