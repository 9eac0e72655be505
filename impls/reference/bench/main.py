"""Benchmark: the reference trainer's eager path, its fast path (reference.fast) and transformers'
implementation of the same model, side by side in one process, on the same packed rows and the same
initial weights, for a model size preset (harness/models/sizes.py).

    python -m packcheck.impls.reference.bench --model 0.6b --row-tokens 4096 --out reports/bench/0.6b-4k.json
    python -m packcheck.impls.reference.bench --model 0.6b --row-tokens 32768 --out reports/bench/0.6b-32k.json
    python -m packcheck.impls.reference.bench --model 1b --row-tokens 4096 --out reports/bench/1b-4k.json
    python -m packcheck.impls.reference.bench --device cpu --model tiny --steps 2 --warmup 1   # the CPU smoke run

Data (data.py): a long-tailed (log-normal, clipped) document-length distribution with
length-1 documents and a document that fills a row, packed first-fit decreasing into rows of
`--row-tokens`, `--rows-per-step` rows a step (default: 32768 tokens a step). Arms (arms.py):
reference-fast, transformers, reference by default (in that order); reference-fast-varlen, reference-fast-flash,
reference-flex, transformers-sdpa and transformers-flash on request.

Per arm: the model is loaded and its optimizer built (setup), `--warmup` steps run (compilation
happens there and is excluded), then `--steps` timed steps, each between two torch.cuda.synchronize().
Reported: the median step time; tokens/s (document tokens, padding excluded) and MFU, each the
median over the timed steps of the step's own rate (steps differ: one may hold a row-long document),
with the totals' rates beside them in the JSON (`mean_*`); FLOPs counted explicitly (flops.py:
6 x matmul parameters x tokens, lm_head included, plus the document-causal attention's
6 x layers x heads x head_dim x sum of L(L+1) over documents; against 989 TFLOP/s), peak memory (torch.cuda.max_memory_allocated from setup to the last step,
reset per arm), the loss of every step (the same data and weights: the arms' step-1 losses agree
to rounding) and the ratio of tokens/s to the transformers arm. An arm that fails prints its error
and the others go on. `--profile DIR` profiles one more step of each arm (torch.profiler: a
chrome trace and the top kernels by device time).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Sequence

import torch

from packcheck.harness.engines import device_missing
from packcheck.harness.models.sizes import resolve_model
from packcheck.harness.provenance import provenance
from packcheck.impls.reference.bench.arms import ARMS, DEFAULT_ARMS, BenchContext
from packcheck.impls.reference.bench.data import build_bench_data
from packcheck.impls.reference.bench.flops import H200_BF16_PEAK, StepFlops, mfu, step_flops
from packcheck.impls.reference.loss import chunked_logprobs
from packcheck.impls.reference.step.pipeline import REFERENCE
from packcheck.impls.reference.step.train_step import build_micro_batches

SCHEMA = "packcheck.bench/1"
STEP_TOKENS = 32768
TINY_ROWS = (64, 4)  # --model tiny (the CPU smoke run): 4 rows of 64 tokens a step


def synchronize(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def release(cuda: bool) -> None:
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    torch._dynamo.reset()


def profile_step(trainer, step: int, directory: Path, arm: str, cuda: bool) -> str:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, record_shapes=True) as prof:
        trainer.step(step)
        synchronize(cuda)
    directory.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(directory / f"{arm}.trace.json"))
    sort_by = "self_device_time_total" if cuda else "self_cpu_time_total"
    top = prof.key_averages().table(sort_by=sort_by, row_limit=40)
    by_shape = prof.key_averages(group_by_input_shape=True).table(sort_by=sort_by, row_limit=25)
    kind = "device" if cuda else "CPU"
    (directory / f"{arm}.top.txt").write_text(f"{arm}: one step, kernels by self {kind} time\n\n{top}\n\nby input shape\n\n{by_shape}\n")
    return str(directory / f"{arm}.top.txt")


def run_arm(arm: str, ctx: BenchContext, warmup: int, steps: int, profile_dir: Path | None) -> dict:
    """One arm's figures, or its error: a failing arm never takes the others down."""
    cuda = ctx.cuda
    result: dict = {"arm": arm}
    trainer = None
    try:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        tick = time.perf_counter()
        trainer = ARMS[arm](ctx)
        synchronize(cuda)
        result["setup_s"] = time.perf_counter() - tick
        losses, seconds = result.setdefault("losses", []), result.setdefault("step_s", [])  # kept if a later step fails
        for step in range(warmup + steps):
            synchronize(cuda)
            tick = time.perf_counter()
            losses.append(trainer.step(step))
            synchronize(cuda)
            seconds.append(time.perf_counter() - tick)
            print(f"  {arm} step {step + 1}/{warmup + steps}: {seconds[-1] * 1e3:.1f} ms, loss {losses[-1]:.6f}", flush=True)
        result |= {"warmup_s": sum(seconds[:warmup]), "median_step_s": statistics.median(seconds[warmup:])}
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
        prefetch = getattr(trainer, "prefetch", None)
        if prefetch is not None:  # how long a timed step still waited for its rows from the worker process
            result["row_wait_s"] = prefetch.waited_s
            result["median_row_wait_s"] = statistics.median(prefetch.waited_s[warmup:warmup + steps])
        if profile_dir is not None:
            try:  # the figures above stand whatever the profiler does
                result["profile"] = profile_step(trainer, warmup + steps, profile_dir, arm, cuda)
            except Exception as err:  # noqa: BLE001
                result["profile_error"] = f"{type(err).__name__}: {err}"[:2000]
                print(f"  {arm} profile failed: {result['profile_error']}", file=sys.stderr, flush=True)
    except Exception as err:  # noqa: BLE001 -- reported in the table and the JSON, then the next arm runs
        result["error"] = f"{type(err).__name__}: {err}"[:4000]
        result["traceback"] = traceback.format_exc()[-8000:]
        print(f"  {arm} FAILED: {result['error']}", file=sys.stderr, flush=True)
        print(result["traceback"], file=sys.stderr, flush=True)
    finally:
        prefetch = getattr(trainer, "prefetch", None)
        if prefetch is not None:
            prefetch.close()
        del trainer, prefetch
        release(cuda)
    if arm.startswith("reference-fast") and chunked_logprobs.COMPILE_FAILURES:
        result["compile_failures"] = list(chunked_logprobs.COMPILE_FAILURES)
    return result


def host_row_build_seconds(cases) -> float:
    """The median time the reference's row builder takes for one step on this host (inside the `reference` arm's step)."""
    seconds = []
    for case in cases:
        tick = time.perf_counter()
        build_micro_batches(case, REFERENCE)
        seconds.append(time.perf_counter() - tick)
    return statistics.median(seconds)


def add_rates(results: dict, flops: list[StepFlops], warmup: int, peak: float) -> None:
    """Rates per timed step (its own tokens and FLOPs over its own time: steps differ, one may hold a
    row-long document), then their median; `mean_*`: the timed steps' totals over their total time."""
    timed_seconds = {arm: r["step_s"][warmup:] for arm, r in results.items() if "median_step_s" in r}
    base = statistics.median(f.tokens / s for f, s in zip(flops, timed_seconds["transformers"])) if "transformers" in timed_seconds else None
    for arm, seconds in timed_seconds.items():
        result = results[arm]
        result["tokens_per_s"] = statistics.median(f.tokens / s for f, s in zip(flops, seconds))
        result["tflops"] = statistics.median(f.total / s for f, s in zip(flops, seconds)) / 1e12
        result["mfu"] = statistics.median(mfu(f.total, s, peak) for f, s in zip(flops, seconds))
        result["mean_tokens_per_s"] = sum(f.tokens for f in flops) / sum(seconds)
        result["mean_mfu"] = mfu(sum(f.total for f in flops), sum(seconds), peak)
        result["vs_transformers"] = result["tokens_per_s"] / base if base else None


def table(results: dict) -> str:
    lines = ["| arm | median step (ms) | tokens/s | TFLOP/s | MFU | peak memory (GiB) | vs transformers | loss step 1 | setup + warm-up (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm, r in results.items():
        if "error" in r:
            lines.append(f"| {arm} | failed: {r['error'][:120].replace('|', '/')} | | | | | | | |")
            continue
        memory = "-" if r["peak_memory_gib"] is None else f"{r['peak_memory_gib']:.1f}"
        ratio = "-" if r.get("vs_transformers") is None else f"{r['vs_transformers']:.2f}x"
        lines.append(f"| {arm} | {r['median_step_s'] * 1e3:.1f} | {r['tokens_per_s']:,.0f} | {r['tflops']:.1f} | {r['mfu'] * 100:.1f}% | "
                     f"{memory} | {ratio} | {r['losses'][0]:.6f} | {r['setup_s'] + r['warmup_s']:.1f} |")
    return "\n".join(lines)


def write_report(report: dict, out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m packcheck.impls.reference.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="0.6b", help="a size preset of the family: tiny, 0.6b, 1b (default: %(default)s)")
    parser.add_argument("--family", default="qwen3", choices=("qwen3", "llama"), help="model family (default: %(default)s)")
    parser.add_argument("--row-tokens", type=int, default=None, help=f"tokens per packed row (default: 4096; {TINY_ROWS[0]} for tiny)")
    parser.add_argument("--rows-per-step", type=int, default=None,
                        help=f"rows per step (default: {STEP_TOKENS} tokens a step; {TINY_ROWS[1]} rows for tiny)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first; compilation happens there (default: %(default)s)")
    parser.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS), choices=sorted(ARMS), help="arms, in run order (default: %(default)s)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    parser.add_argument("--dtype", default=None, choices=("bfloat16", "float32", "float64"), help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--seed", type=int, default=0, help="seeds the document lengths, tokens and row order (weights: the preset's)")
    parser.add_argument("--doc-median", type=float, default=None, help="median document length (default: min(300, row tokens / 8))")
    parser.add_argument("--doc-sigma", type=float, default=1.3, help="log-normal spread of document lengths (default: %(default)s)")
    parser.add_argument("--ones", type=float, default=0.02, help="fraction of length-1 documents (default: %(default)s)")
    parser.add_argument("--peak", type=float, default=H200_BF16_PEAK, help="peak FLOP/s for MFU (default: %(default)g)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("--profile", type=Path, default=None, help="profile one more step per arm into this folder")
    args = parser.parse_args(argv)
    if missing := device_missing(args.device):
        parser.error(f"--device cuda: {missing}; use --device cpu")
    tiny = args.model == "tiny"
    args.row_tokens = args.row_tokens or (TINY_ROWS[0] if tiny else 4096)
    args.rows_per_step = args.rows_per_step or (TINY_ROWS[1] if tiny else max(1, STEP_TOKENS // args.row_tokens))
    for name in ("row_tokens", "rows_per_step", "steps", "warmup"):
        if getattr(args, name) < (1 if name != "warmup" else 0):
            parser.error(f"--{name.replace('_', '-')} must be at least {1 if name != 'warmup' else 0}")
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    args.doc_median = args.doc_median or min(300.0, args.row_tokens / 8)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import transformers

        transformers.logging.disable_progress_bar()
    except ImportError:
        pass
    cuda = args.device == "cuda"
    if cuda:  # every layer has the same code; enough compiled entries that none falls back to eager
        limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
        setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))
    choice = resolve_model(args.family, args.model)
    config = choice.spec.config
    data_steps = args.warmup + args.steps + (1 if args.profile else 0)
    data = build_bench_data(choice.spec, row_tokens=args.row_tokens, rows_per_step=args.rows_per_step, steps=data_steps, seed=args.seed,
                            median=args.doc_median, sigma=args.doc_sigma, ones=args.ones, dtype=args.dtype, device=args.device)
    timed = range(args.warmup, args.warmup + args.steps)
    flops = [step_flops(config, data.step_lengths(s)) for s in timed]
    flops_per_step = statistics.fmean(f.total for f in flops)
    tokens_per_step = statistics.fmean(f.tokens for f in flops)
    packing = data.stats(args.warmup)
    host_rows_s = host_row_build_seconds(data.cases[:3])
    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    ctx = BenchContext(checkpoint=choice.spec.checkpoint, data=data, dtype=args.dtype, device=device)
    print(f"bench: {args.family} {args.model} ({flops[0].matmul_params / 1e9:.3f}B matmul parameters), {args.dtype} on {device} "
          f"({torch.cuda.get_device_name() if cuda else 'cpu'}); {args.rows_per_step} x {args.row_tokens}-token rows a step; "
          f"{packing['documents_per_row']:.1f} documents a row, packing efficiency {packing['packing_efficiency'] * 100:.2f}% "
          f"(one document per padded row: {packing['padding_baseline_efficiency'] * 100:.2f}%); "
          f"{flops_per_step / 1e12:.1f} TFLOP a step ({statistics.fmean(f.attention for f in flops) / flops_per_step * 100:.1f}% attention); "
          f"building a step's rows on the host takes {host_rows_s * 1e3:.0f} ms", flush=True)
    command = ["python", "-m", "packcheck.impls.reference.bench", *(sys.argv[1:] if argv is None else argv)]
    report = {
        "schema": SCHEMA, "complete": False, "provenance": provenance(device=args.device, command=command),
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "model_config": config,
        "packing": packing, "host_row_build_s": host_rows_s, "flops_per_step": flops_per_step, "tokens_per_step": tokens_per_step,
        "flops": [f.to_json() for f in flops], "peak_flops": args.peak, "arms": {},
    }
    results = report["arms"]
    for arm in args.arms:
        print(f"arm {arm}", flush=True)
        results[arm] = run_arm(arm, ctx, args.warmup, args.steps, args.profile)
        add_rates(results, flops, args.warmup, args.peak)
        print(table({arm: results[arm]}).splitlines()[-1], flush=True)
        write_report(report, args.out)  # after every arm: a run stopped part-way keeps the arms it finished
    report["complete"] = True
    print(table(results))
    write_report(report, args.out)
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0 if all("error" not in r for r in results.values()) else 1
