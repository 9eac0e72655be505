"""`packcheck explain SCENARIO [--family F] [--dtype D] [--run]`: the rules of a scenario before any failure.

Prints the invariant and how the scenario tests it (its module's docstring), the arms it builds
for a family and dtype (layout, micro-batches, mesh, loss; optional arms marked), the quantities
it compares with their metric and the tolerance per dtype (and where that tolerance comes from),
what error/tolerance means, and the bugs it is proven to catch with the mutant that carries each.
`--run` also runs the reference trainer on it and lists every comparison it made, grouped, with
the reference's own worst error/tolerance: the exact quantities and metrics, measured.
"""

from __future__ import annotations

import sys
import textwrap

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.run.options import NAMED_DTYPES, add_option

WIDTH = 100  # paragraphs
TABLE_WIDTH = 130  # tables: their last column wraps under itself
# what each Tolerance field bounds, as a comparison names it (quantity: metric)
QUANTITIES = (
    ("logprobs", "logprobs: max_abs", "every token's log-prob: max |a - b| in nats"),
    ("loss", "loss: rel", "the loss: |a - b| / |b|"),
    ("count", "num_loss_tokens: abs", "the global loss-token count: |a - b| (integers: exact)"),
    ("grad", "grad: rel_l2, max_rel", "every parameter's gradient tensor: ||a - b|| / ||b|| and max |a - b| / max |b|"),
    ("dloss_dlogprobs", "dloss_dlogprobs: max_rel", "each token's loss weight d loss / d logprob: max |a - b| / max |b|; an "
                                                    "estimator's per-sample advantages too (advantages: max_rel), which scale them"),
    ("params_after", "params_after: cond_rel_l2, cond_max_rel", "parameters after the optimizer step, errors weighted by the "
                                                                "AdamW step's conditioning (harness/compare/conditioning.py)"),
    ("router_reassigned", "router_tokens_per_expert: reassigned", "MoE: the fraction of routing assignments that moved to another expert"),
)
EXACT = ("Sets are compared exactly: the tokens in the loss (supervised_set), the clipped tokens of a policy loss (clipped_set), "
         "every sample returned (samples), and so are a distributed arm's ranks' parameters after the step, bit for bit "
         "(replica_params); a result that breaks the contract (result, mesh) fails outright.")
ERROR_OVER_TOLERANCE = ("error/tolerance (the `margin` of results.json): a comparison's observed error divided by the allowed "
                        "error above. Below 1 passes; {band}. Each dtype has its own bands, from the measurements in docs/margins.md and "
                        "docs/gpu.md (harness/compare/bands.py).")


def error_over_tolerance(dtype: str) -> str:
    """What a margin means, with `dtype`'s clean and bug bands."""
    from packcheck.harness.compare.bands import BANDS

    return ERROR_OVER_TOLERANCE.format(band=BANDS[dtype].sentence())


def add_parser(commands) -> None:
    parser = commands.add_parser("explain", help="what a scenario checks: invariant, arms, quantities, tolerances, bugs it catches")
    parser.add_argument("scenario", help="a scenario name (packcheck list scenarios)")
    parser.add_argument("--family", default="llama", help="the family to build the arms for (default: llama)")
    add_option(parser, "dtype", default="float64", means=NAMED_DTYPES)
    parser.add_argument("--run", action="store_true",
                        help="also run the reference trainer on it and list every comparison it makes (default: no)")
    parser.set_defaults(handler=handle)


def _para(text: str, indent: str = "  ") -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH, initial_indent=indent, subsequent_indent=indent)


def _columns(rows: list[tuple], indent: str = "  ") -> list[str]:
    """Aligned columns; the last one wrapped to the page, its continuation lines under it."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        head = indent + "".join(str(c).ljust(w + 2) for c, w in zip(r, widths))
        last = textwrap.wrap(str(r[-1]), max(TABLE_WIDTH - len(head), 40), break_long_words=False, break_on_hyphens=False) or [""]
        lines += [head + last[0], *(" " * len(head) + more for more in last[1:])]
    return lines


def how_it_tests(scenario) -> list[str]:
    """The scenario module's docstring, less its first line (the invariant's headline), as paragraphs."""
    doc = (sys.modules[scenario.judge.__module__].__doc__ or "").strip()
    body = doc.split("\n\n", 1)[1] if "\n\n" in doc else ""
    return [_para(p) for p in body.split("\n\n") if p.strip()]


def arm_rows(scenario, family: str, dtype: str) -> list[str]:
    from packcheck.harness.run.scenario_runner import setting_for

    try:
        arms = scenario.build(setting_for(family, dtype, "cpu"))
    except Exception as err:  # noqa: BLE001 - a scenario that does not build for this family says why
        return [_para(f"not built for {family} {dtype}: {err}")]
    requests = any(case.pad_poison is not None for case in arms.values())  # a column only where some arm asks
    rows = [("arm", "layout", "samples", "samples per micro-batch (| between ranks)", "mesh", "loss", *(("request",) * requests))]
    for name, case in arms.items():
        request = (case.pad_poison.describe() if case.pad_poison is not None else "-",) * requests
        rows.append((name + (" *" if name in scenario.optional_arms else ""), case.layout.describe(), len(case.samples),
                     micro_batches(case), case.parallel.describe(), case.loss.describe(), *request))
    lines = _columns(rows)
    if scenario.optional_arms:
        lines.append(_para("* optional: an engine that cannot run it (no DP, no CP, no packing, ...) has it skipped, with the "
                           "reason in the verdict, and is judged on the rest"))
    if any(stage.runner is None for stage in scenario.stages[1:]):
        lines.append(_para("+ arms built from these arms' results (e.g. old log-probs taken from the engine's own rollout)"))
    return lines


def micro_batches(case) -> str:
    """The arm's samples per micro-batch; under a token budget, per rank, and how many micro-batches its in-order cut makes."""
    if case.token_budget is None:
        return case.partition.describe()
    cut = "|".join(str(len(rank)) for rank in case.micro_batches_by_rank)
    return f"{case.partition.describe()} per rank, cut by the engine ({case.token_budget.describe()}; in order {cut})"


def tolerance_rows(scenario) -> list[str]:
    from packcheck.harness.compare import NOISE_FACTOR, TOLERANCES
    from packcheck.harness.compare.tolerances import table_source

    dtypes = list(TOLERANCES)
    rows = [("quantity: metric", *dtypes, "what")]
    rows += [(label, *(f"{getattr(TOLERANCES[d], field):g}" for d in dtypes), what) for field, label, what in QUANTITIES]
    lines = _columns(rows)
    lines.append(_para(EXACT))
    source = f"Source: {table_source()}."
    if any(stage.golden for stage in scenario.stages):
        source += (f" This scenario compares against the stored float64 golden: in float64 with the table; in a lower "
                   f"precision with {NOISE_FACTOR:g} x the reference's own error at that precision (its noise floor, measured "
                   "on every CPU kernel path when the golden was written: fixtures/goldens/<family>/provenance.json), never "
                   "below float64's.")
    return lines + [_para(source)]


BUGS_DOC = "docs/bugs.md in packcheck's repository"


def catch_rows(scenario) -> list[str]:
    from packcheck.harness.cli.list_cmd import mutant_summary
    from packcheck.harness.engines import mutants_by_bug

    carriers = mutants_by_bug()
    rows = [("bug (docs/bugs.md)", "mutant", "what it does")]
    for bug in scenario.catches:
        for name, engine in carriers.get(bug, [("(no mutant)", None)]):
            rows.append((bug, name, mutant_summary(engine) if engine is not None else ""))
    return _columns(rows)


def measured_rows(scenario, family: str, dtype: str) -> list[str]:
    from packcheck.harness.run.scenario_runner import run_scenario

    verdict = run_scenario("reference", scenario, family, dtype)
    groups: dict[tuple, list] = {}
    for c in verdict.comparisons:
        groups.setdefault((c.quantity, c.metric), []).append(c)
    rows = [("quantity", "metric", "comparisons", "arm pairs", "allowed", "reference's worst error/tolerance")]
    for (quantity, metric), cs in groups.items():
        rows.append((quantity, metric, len(cs), len({str(c.arms) for c in cs}), f"{max(c.threshold for c in cs):g}",
                     f"{max(c.margin for c in cs):.2g}"))
    head = [_para(f"The reference trainer on {family} {dtype}: {verdict.status.upper()}, {len(verdict.comparisons)} comparisons "
                  f"({verdict.seconds:.1f} s).")]
    return head + (_columns(rows) if len(rows) > 1 else [_para(verdict.message())])


def handle(args) -> int:
    from packcheck.harness.contract import DTYPES
    from packcheck.harness.models import get_family
    from packcheck.harness.scenarios import get_scenario

    scenario = get_scenario(args.scenario)
    get_family(args.family)
    if args.dtype == "auto":
        raise UsageError("--dtype auto picks an engine's dtype and explain runs no engine: give float64, float32 or bfloat16")
    if args.dtype not in DTYPES:
        raise UsageError(f"--dtype {args.dtype!r} is not one of {', '.join(DTYPES)}")
    out = [scenario.name, "", "Invariant (exact in real arithmetic):", _para(scenario.invariant), ""]
    how = how_it_tests(scenario)
    if how:
        out += ["How it tests it:", *sum(([p, ""] for p in how), [])]
    if scenario.notes:
        out += ["Notes:", _para(scenario.notes), ""]
    out += [f"Arms, as built for {args.family} {args.dtype}:", *arm_rows(scenario, args.family, args.dtype), ""]
    out += ["Allowed error per dtype of each quantity a scenario may compare (each arm against another arm, the harness's "
            f"own computation, or the golden; --run lists exactly what {scenario.name} compares):",
            *tolerance_rows(scenario), "", _para(error_over_tolerance(args.dtype), ""), ""]
    out += ["Proven to catch (in CI, each bug by the mutant that carries it; where each happened and its numeric signature: "
            f"{BUGS_DOC}):", *catch_rows(scenario)]
    if args.run:
        out += ["", "Measured:", *measured_rows(scenario, args.family, args.dtype)]
    else:
        out += ["", f"Every comparison it makes, measured on the reference: packcheck explain {scenario.name} --run"]
    print("\n".join(out))
    return 0


# Ctrl-C while it imports torch (seconds: the scenarios' and engines' registries) is one line and exit 2, as at start-up:
# main() keeps its start-up handlers in place for it (harness/cli/main.py)
handle.catches_signals = True
