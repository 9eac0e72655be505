"""`packcheck kernels`: the attention and linear-attention kernels this machine has, each run forward and backward on
hypothesis-drawn packings against a float64 per-document oracle, one verdict per (kernel, dtype, head dim, head ratio),
written as a run directory (harness/kernels/, docs/kernels.md).

Exit status: 0 every verdict passes or is a pinned kernel finding's expected failure, 1 a failure, an error or an
unexpected pass, 2 a usage error or nothing tested (every verdict unsupported).
"""

from __future__ import annotations

import sys

from packcheck.harness.cli.errors import UsageError
from packcheck.harness.cli.interrupt import Interrupted, catch_signals, hold_signals, restore
from packcheck.harness.run.options import add_option

DEFAULT_OUT = "reports/kernels"
DTYPES = ("float64", "float32", "bfloat16", "float16")

EPILOG = """\
examples:
  # every kernel of this GPU, over every head dim (8-256 by 8) and GQA ratio (1-8); --device cpu: the CPU's kernels
  packcheck kernels --device cuda --out reports/kernels
  # flash-attn-4 at three head dims, bf16, more packings per configuration
  packcheck kernels --device cuda --kernel flash-attn-4 --head-dims 16,48,128 --examples 20
  # exactly one case (what a verdict's shrunk case prints)
  packcheck kernels --kernel flash-attn-4 --device cuda --dtypes bfloat16 --head-dims 80 --gqa 1 --kv-heads 1 --documents 2
  # your own kernel: a packcheck.harness.kernels.registry.Kernel named NAME in mypkg/kernels.py
  packcheck kernels --kernel mypkg.kernels:NAME --device cpu
"""


def add_parser(commands) -> None:
    import argparse

    parser = commands.add_parser("kernels", help="check varlen attention and linear-attention kernels against a float64 oracle",
                                 epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", nargs="+", default=None, metavar="NAME",
                        help="registered kernels or package.module:NAME (default: every registered kernel; those this machine "
                             "lacks are reported unsupported with the reason)")
    add_option(parser, "device")  # cpu unless asked, as `packcheck run`'s
    # not the table's --dtype (one dtype an engine runs): a kernel is checked in several, float16 among them
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=None,
                        help="default: bfloat16 on cuda; on cpu every dtype each kernel declares there")
    parser.add_argument("--head-dims", default="8-256", help="head dims: a list (16,48,80) or a range of multiples of 8 (8-256, the default)")
    parser.add_argument("--gqa", default="1-8", help="query heads per kv head: a list (1,4) or a range (1-8, the default); "
                                                     "the linear kernels take 1")
    parser.add_argument("--examples", type=int, default=8, help="packings drawn per configuration (default: 8)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the packings and the inputs (default: 0)")
    parser.add_argument("--kv-heads", type=int, default=None, help="with --documents: judge exactly that case (default: drawn)")
    parser.add_argument("--documents", default=None, help="document lengths of exactly one case, e.g. 37,1,5 (default: drawn)")
    parser.add_argument("--no-shrink", action="store_true", help="report the first failing case as drawn (default: shrink it)")
    parser.add_argument("--out", default=None, help=f"output directory (default: {DEFAULT_OUT})")
    parser.set_defaults(handler=handle)


def numbers(option: str, text: str, step: int) -> tuple[int, ...]:
    """"16,48,80" or "8-256" (every multiple of `step` in the range) as numbers, or a usage error naming the option."""
    try:
        if "-" in text and "," not in text:
            low, high = (int(part) for part in text.split("-"))
            found = tuple(n for n in range(low, high + 1) if n % step == 0)
        else:
            found = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{option} {text!r}: give numbers separated by commas (16,48) or a range (8-256)") from None
    if not found or min(found) < 1:
        raise UsageError(f"{option} {text!r}: give positive numbers, e.g. {option} {'16,48' if step > 1 else '1,4'}")
    return found


def plan_of(args):
    import torch

    from packcheck.harness.kernels.registry import KERNELS, resolve_kernel
    from packcheck.harness.kernels.session import Plan

    if args.examples < 1:
        raise UsageError(f"--examples {args.examples}: give 1 or more packings per configuration")
    if (args.documents is None) != (args.kv_heads is None):
        raise UsageError("--documents and --kv-heads go together (one exact case); give both, or neither to draw cases")
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: torch sees no GPU here; use --device cpu")
    documents = None if args.documents is None else numbers("--documents", args.documents, 1)
    if args.kv_heads is not None and args.kv_heads < 1:
        raise UsageError(f"--kv-heads {args.kv_heads}: give 1 or more")
    specs = args.kernel or list(KERNELS)
    return Plan(kernels=tuple((spec, resolve_kernel(spec)) for spec in specs), device=device,
                dtypes=None if args.dtypes is None else tuple(args.dtypes), head_dims=numbers("--head-dims", args.head_dims, 8),
                ratios=numbers("--gqa", args.gqa, 1), examples=args.examples, seed=args.seed, kv_heads=args.kv_heads,
                documents=documents, shrink=not args.no_shrink)


def handle(args) -> int:
    from packcheck.harness.cli.run_cmd import output_directory
    from packcheck.harness.kernels.session import exit_status, run_kernels
    from packcheck.harness.provenance import provenance
    from packcheck.harness.report import write_run_reports
    from packcheck.harness.run_dir import RunDir
    from packcheck.harness.run_dir.results import ResultsFile

    plan = plan_of(args)
    run_dir = RunDir(output_directory(args.out or DEFAULT_OUT))
    releases = {spec: kernel.release() for spec, kernel in plan.kernels}
    results = ResultsFile(run_dir, provenance(plan.device, ["packcheck", *args.argv]) | {"seed": plan.seed, "kernel_releases": releases})
    verdicts: list = []

    def keep(verdict) -> None:
        results.add(verdict)
        verdicts.append(verdict)

    interrupted = None
    previous = catch_signals()
    try:
        run_kernels(plan, record=keep)
    except Interrupted as stop:  # SIGINT or SIGTERM (a CI step's timeout): the verdicts so far are kept and reported
        interrupted = str(stop)
    finally:
        hold_signals()  # the files below are written whole, whatever arrives meanwhile
        results.write()
        if verdicts:
            write_run_reports(run_dir)
        restore(previous)
    counts = {s: sum(v.status == s for v in verdicts) for s in ("pass", "fail", "error", "unsupported")}
    expected = sum(bool(v.known_finding) for v in verdicts)
    print(f"{len(verdicts)} verdicts: " + ", ".join(f"{n} {s}" for s, n in counts.items())
          + (f" ({expected} of the failures are pinned findings, expected)" if expected else "")
          + f"\nreport:  {run_dir.report_html}\nresults: {run_dir.results}", file=sys.stderr)
    if interrupted:
        print(f"packcheck kernels: interrupted ({interrupted}) after {len(verdicts)} verdicts; they are in the results and the report",
              file=sys.stderr)
        return 2
    status = exit_status(verdicts)
    if status == 2:
        print("packcheck kernels: error: every verdict was unsupported: nothing was tested (see each verdict's reason)", file=sys.stderr)
    return status


handle.catches_signals = True  # main() keeps its start-up handlers in place up to handle()'s own (harness/cli/main.py)
