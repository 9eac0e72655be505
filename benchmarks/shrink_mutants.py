"""Each public mutant's failing verdict shrunk, with the sizes before and after and the seconds it took (docs/shrink.md).

For every (mutant, scenario, family) of CASES (the scenarios that flag it): the verdict is judged at the scenario's
size (as `packcheck run` judges it), shrunk from it within --budget seconds (harness/shrink, as `run --shrink` does),
and the smallest case replayed from its file; one Markdown row per case: tokens, documents, ranks and layers before
-> after, how many times fewer tokens, the seconds of the judging and of the shrink (`packcheck shrink RUN_DIR/...`
judges again first: both), trials, whether the search ran to its end, and whether the replay failed the same
comparison again. Launches stay warm across the cases (one pool).

Usage:
  1. python3 benchmarks/shrink_mutants.py                                   # every case, CPU float64, 120 s each
  2. python3 benchmarks/shrink_mutants.py --only cross-doc-attention        # the cases of one mutant
  3. python3 benchmarks/shrink_mutants.py --all                             # every scenario x the mutants it catches (`catches`)
  4. python3 benchmarks/shrink_mutants.py --device cuda --dtype bfloat16 --model 0.6b --budget 600   # on a GPU, at 0.6B
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from packcheck.harness.engines import resolve_engine
from packcheck.harness.launch import LaunchPool
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.scenarios import SCENARIOS, get_scenario
from packcheck.harness.shrink.driver import NothingToShrink, shrink
from packcheck.harness.shrink.record import read_shrunk, write_shrunk
from packcheck.harness.shrink.replay import replay
from packcheck.harness.shrink.subject import Subject, run

CASES = (  # (mutant, scenario, family)
    ("mutant.cross-doc-attention", "packed_vs_unpacked", "llama"),
    ("mutant.cross-doc-attention", "document_isolation", "llama"),
    ("mutant.boundary-label", "microbatch_invariance", "llama"),
    ("mutant.boundary-label", "packed_vs_unpacked", "llama"),
    ("mutant.const-microbatch-scale", "microbatch_invariance", "llama"),
    ("mutant.positions-not-reset", "packed_vs_unpacked", "llama"),
    ("mutant.dp-count-world-group", "dp_cp_reduction", "llama"),
    ("mutant.linear-attn-state-leak", "linear_attention_reset", "qwen3_5"),
)


def every_claim() -> list[tuple[str, str, str]]:
    """Every scenario with each mutant it claims to catch, on llama where the mutant runs it, else its first family."""
    cases = []
    for scenario in SCENARIOS.values():
        for bug in scenario.catches:
            families = sorted(resolve_engine(f"mutant.{bug}").capabilities.families)
            cases.append((f"mutant.{bug}", scenario.name, "llama" if "llama" in families else families[0]))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="cases whose mutant contains this text (default: all)")
    parser.add_argument("--scenario", default=None, help="cases of this scenario only (default: all)")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds per case (default: 120)")
    parser.add_argument("--device", default="cpu", help="cpu | cuda (default: cpu)")
    parser.add_argument("--dtype", default="float64", help="(default: float64)")
    parser.add_argument("--model", default="tiny", help="a size preset (default: tiny)")
    parser.add_argument("--all", action="store_true", help="every scenario with each mutant it catches (default: CASES)")
    parser.add_argument("--verbose", action="store_true", help="print every trial (default: no)")
    args = parser.parse_args()
    rows = ["| mutant | scenario | family | tokens | documents | ranks | layers | fewer tokens | judged in (s) | shrunk in (s) | trials | ended | replay fails |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    workdir = Path(tempfile.mkdtemp(prefix="shrink-bench-"))
    with LaunchPool(workdir / "launches", 600.0) as pool:
        for engine, scenario, family in every_claim() if args.all else CASES:
            if args.only and args.only not in engine or args.scenario and args.scenario != scenario:
                continue
            subject = Subject(engine=engine, engine_name=engine, scenario=get_scenario(scenario), family=family, dtype=args.dtype,
                              device=args.device, inputs=Inputs(model=args.model))
            started = time.monotonic()
            verdict = run(subject, subject.scenario, None, pool)  # as `packcheck run` judged it before --shrink
            judged = time.monotonic() - started
            try:
                shrunk = shrink(subject, pool, args.budget, say=(lambda line: print(line, file=sys.stderr)) if args.verbose else (lambda line: None),
                                first=verdict)
            except NothingToShrink as why:
                rows.append(f"| {engine} | {scenario} | {family} | {why} (judged in {judged:.0f}s) |||||||||")
                continue
            case = read_shrunk(write_shrunk(shrunk, workdir / f"{engine}-{scenario}.json"))
            again = replay(case, pool)
            b, a = shrunk.before, shrunk.after
            rows.append(f"| {engine} | {scenario} | {family} | {b.tokens} -> {a.tokens} | {b.documents} -> {a.documents} | {b.ranks} -> {a.ranks} "
                        f"| {b.layers} -> {a.layers} | {b.tokens / a.tokens:.1f}x | {judged:.0f} | {shrunk.seconds:.0f} | {shrunk.trials} | "
                        f"{'yes' if shrunk.complete else 'budget'} | {'yes' if shrunk.target.holds(again) else 'NO'} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
