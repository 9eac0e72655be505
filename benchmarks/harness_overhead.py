"""What the harness itself costs per arm at a realistic model size, beside the engine's step (issue 17, item 5).

    python benchmarks/harness_overhead.py --model 0.6b --family llama --device cpu --dtype bfloat16
    python benchmarks/harness_overhead.py --model 0.6b --family qwen3 --device cuda --dtype bfloat16
    python benchmarks/harness_overhead.py --model 0.6b --device cuda --engine-step-seconds 0.70   # the step measured elsewhere
    python benchmarks/harness_overhead.py --model tiny --device cpu --dtype float64 --measure-step   # a quick look on any machine

Each part of an arm's life outside `engine.run`, timed on the same code paths a run takes, medians over `--repeat`:

(a) building: resolving --model (the weights seeded once per (family, size, seed) into the checkpoint cache: reported
    apart, not per arm), every scenario's arms (`Scenario.build`, the data scaled with the model), and handing one
    arm to its launch (`Launch._submit`: the case's private copy of the checkpoint and its case.json);
(b) transfer: rank 0's side (`validate_result`, then `StepResult.save`: safetensors on disk; on a GPU `share`, validated
    with `values=False` as the worker does: the finiteness is the harness's) and
    the harness's side (`StepResult.load`, on a GPU `open_shared`; `validate_result` again in `accept`), for a result with a gradient of
    every parameter of the checkpoint in the run's dtype, made on the run's device as the engine would return it;
(c) comparison: `compare_results` of two such results (every gradient tensor), as the judges call it;
(d) recording: the verdict's rows appended to results.jsonl, and results.json written at the end (`ResultsFile`),
    `--save-arms none`.
With `--device cuda`, (b) and (c) are what a CUDA run does: the result made and shared by another process through CUDA
IPC (harness/launch/device_result.py), opened and copied on the GPU by this one, and compared there in float64.

The engine's step is `engine.run(case)` of the reference on the packed arm of packed_vs_unpacked, in this process
(world 1, after one warm-up run), timed with `--device cuda` or `--measure-step`; `--engine-step-seconds` takes it
from elsewhere instead. The overhead per arm is (a) per arm + (b) + (c) / 2 (one comparison serves two arms) + (d) (per
verdict: an upper bound per arm).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from packcheck.harness.compare import Arms, compare_results, tolerance_for
from packcheck.harness.compare.metrics import batchable
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import device_missing, resolve_engine, validate_result
from packcheck.harness.engines.validate import checkpoint_shapes
from packcheck.harness.launch.device_result import open_shared, share
from packcheck.harness.launch.launch import Launch
from packcheck.harness.launch.layout import LaunchDir
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.results import ResultsFile, record_of
from packcheck.harness.judging.status import Status
from packcheck.harness.run.verdict import Verdict
from packcheck.harness.scenarios import SCENARIOS, get_scenario

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16}


def timed(fn, repeat: int) -> tuple[float, object]:
    """The median wall time of `repeat` calls of fn() (CUDA work finished inside each), and the last call's value."""
    times, value = [], None
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        value = fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def fake_result(case: Case, dtype: torch.dtype, device: str, seed: int) -> StepResult:
    """A result of the contract's shape: a gradient for every parameter of the case's checkpoint, log-probs per sample."""
    generator = torch.Generator(device=device).manual_seed(seed)
    shapes = checkpoint_shapes(case.model.checkpoint)
    grads = {name: torch.randn(shape, generator=generator, dtype=dtype, device=device) for name, shape in shapes.items()}
    logprobs = []
    for sample in case.samples:
        lp = -torch.rand(len(sample.input_ids), generator=generator, dtype=torch.float64, device=device).to(dtype) - 0.01
        lp[0] = 0.0
        logprobs.append(lp)
    return StepResult(logprobs=logprobs, loss=2.5, num_loss_tokens=len(case.supervised), grads=grads)


def building(setting, repeat: int) -> dict:
    """(a): every scenario's arms, built; a scenario that cannot build at this setting is named, not timed."""
    cold_start = time.perf_counter()
    first = {name: scenario.build(setting) for name, scenario in SCENARIOS.items() if _builds(scenario, setting)}
    cold = time.perf_counter() - cold_start
    per_arm = {}
    for name in first:
        seconds, arms = timed(lambda: SCENARIOS[name].build(setting), repeat)
        per_arm[name] = (seconds / max(1, len(arms)), len(arms))
    return {"cold_first_build_s": cold, "per_arm": per_arm,
            "skipped": sorted(set(SCENARIOS) - set(first))}


def _builds(scenario, setting) -> bool:
    if scenario.applies(setting, resolve_engine("reference").capabilities):
        return False
    try:
        scenario.build(setting)
    except Exception as err:  # noqa: BLE001 - reported: a scenario that does not build at this size is not timed
        print(f"  {scenario.name}: does not build at this setting ({type(err).__name__}: {err})")
        return False
    return True


def submitting(case: Case, repeat: int) -> tuple[float, float]:
    """(a): Launch._submit for one arm (its private checkpoint, case.json, queue entry): the launch's first case, which
    copies the checkpoint, and the median of the cases after it."""
    with tempfile.TemporaryDirectory(prefix="packcheck-overhead-") as scratch:
        launch = Launch(LaunchDir(scratch), None, 1, case.device, 600.0, 60.0)
        launch.dir.cases.mkdir()
        launch.dir.queue.mkdir()
        first, _ = timed(lambda: launch._submit(case, "run"), 1)
        later, _ = timed(lambda: launch._submit(case, "run"), repeat)
    return first, later


def transfer(case: Case, result: StepResult, repeat: int) -> dict:
    """(b): rank 0 validates and saves; the harness loads and validates again."""
    with tempfile.TemporaryDirectory(prefix="packcheck-overhead-") as scratch:
        out = Path(scratch) / "result"
        validate_rank, _ = timed(lambda: validate_result("bench", case, result), repeat)

        def save():
            shutil.rmtree(out, ignore_errors=True)
            result.save(out)

        save_s, _ = timed(save, repeat)
        load_s, loaded = timed(lambda: StepResult.load(out), repeat)
        validate_harness, _ = timed(lambda: validate_result("bench", case, loaded), repeat)
        size = sum(f.stat().st_size for f in out.iterdir())
    return {"rank_validate_s": validate_rank, "rank_save_s": save_s, "harness_load_s": load_s, "harness_validate_s": validate_harness,
            "bytes": size, "loaded": loaded}


def comparison(case: Case, observed: StepResult, reference: StepResult, dtype: str, repeat: int) -> tuple[float, list]:
    """(c): the judges' compare_results of two arms, every gradient tensor included."""
    return timed(lambda: compare_results(Arms("packed", "unpacked"), observed, reference, tolerance_for(dtype), lambda i, t: f"{i}:{t}"),
                 repeat)


def device_transfer(case: Case, dtype: torch.dtype, repeat: int) -> dict:
    """(b) on a GPU, as a run does it (harness/launch/device_result.py): another process makes the result on the GPU,
    validates it and shares it through CUDA IPC (its side timed there); this process opens it (copying it into its own
    GPU memory) and validates it again. Two results come back, for (c)."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="packcheck-overhead-") as scratch:
        timings = Path(scratch) / "rank.json"
        producer = context.Process(target=_produce, args=(case, str(dtype).removeprefix("torch."), scratch, repeat + 1, str(timings)))
        producer.start()
        opened, load_times, validate_times = [], [], []
        for index in range(repeat + 1):
            directory = Path(scratch) / f"result{index}"
            while not (directory / "shared").exists():
                if not producer.is_alive():
                    raise RuntimeError(f"the producer exited with {producer.exitcode}")
                time.sleep(0.005)
            load_s, loaded = timed(lambda: open_shared(directory), 1)
            validate_s, _ = timed(lambda: validate_result("bench", case, loaded), 1)
            (directory / "opened").write_text("")
            load_times.append(load_s)
            validate_times.append(validate_s)
            opened = [loaded, *opened[:1]]
        producer.join(timeout=120)
        rank = json.loads(timings.read_text())
    return {"rank_validate_s": statistics.median(rank["validate"][1:]), "rank_save_s": statistics.median(rank["share"][1:]),
            "harness_load_s": statistics.median(load_times[1:]), "harness_validate_s": statistics.median(validate_times[1:]),
            "bytes": sum(t.numel() * t.element_size() for t in opened[0].grads.values()), "loaded": opened[0], "other": opened[1]}


def _produce(case: Case, dtype: str, scratch: str, count: int, timings: str) -> None:
    """The rank's side of device_transfer, in its own process: `count` results made, validated and shared, one at a time;
    the first of each timing is a warm-up (the benchmark's medians leave it out)."""
    share_times, validate_times = [], []
    for index in range(count):
        result = fake_result(case, DTYPES[dtype], "cuda", seed=index)
        directory = Path(scratch) / f"result{index}"
        torch.cuda.ipc_collect()
        # as harness/launch/worker.py validates a result it shares: all but the values' finiteness, left to the harness
        validate_s, _ = timed(lambda made=result: validate_result("bench", case, made, values=False), 1)
        share_s, _ = timed(lambda made=result: share(made, directory), 1)
        share_times.append(share_s)
        validate_times.append(validate_s)
        (directory / "shared").write_text("")
        del result
        while not (directory / "opened").exists():
            time.sleep(0.005)
    Path(timings).write_text(json.dumps({"share": share_times, "validate": validate_times}))


def recording(rows: list, setting, repeat: int) -> tuple[float, float, float]:
    """(d): one verdict with these comparisons appended to results.jsonl (what a run does after each verdict), and
    results.json with its tables written from them (what it does once, at the end); and of the append, the verdict's
    line made (its rows' JSON, without writing it)."""
    verdict = Verdict(engine="reference", engine_spec="reference", family=setting.family, scenario="packed_vs_unpacked",
                      dtype=setting.dtype, device=setting.device, status=Status.PASS, comparisons=tuple(rows))
    with tempfile.TemporaryDirectory(prefix="packcheck-overhead-") as scratch:
        results = ResultsFile(RunDir(scratch), {"bench": True})
        add_s, _ = timed(lambda: results.add(verdict), repeat)
        write_s, _ = timed(results.write, repeat)
    encode_s, _ = timed(lambda: json.dumps(record_of(verdict)), repeat)
    return add_s, write_s, encode_s


def engine_step(case: Case, repeat: int) -> tuple[float, float]:
    """The reference's engine.run(case) in this process (world 1), after a warm-up run, and of it the loading of
    the checkpoint onto the device (impls/reference/model/loading.py), timed apart."""
    from packcheck.impls.reference.engine import DTYPES as ENGINE_DTYPES
    from packcheck.impls.reference.model.loading import load_model

    engine = resolve_engine("reference")
    engine.run(case)
    seconds, _ = timed(lambda: engine.run(case), repeat)
    device = f"cuda:{torch.cuda.current_device()}" if case.device == "cuda" else "cpu"
    loading, _ = timed(lambda: load_model(case.model.checkpoint, ENGINE_DTYPES[case.dtype], device), repeat)
    return seconds, loading


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="0.6b", help="size preset or config directory (default: 0.6b)")
    parser.add_argument("--family", default="llama", help="llama or qwen3 (default: llama)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="default: cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=tuple(DTYPES), help="default: bfloat16")
    parser.add_argument("--seed", type=int, default=0, help="the run's --seed (default: 0)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats per part; medians are reported (default: 3)")
    parser.add_argument("--engine-step-seconds", type=float, default=None,
                        help="the engine's step, measured elsewhere (default: measure it on cuda, or with --measure-step)")
    parser.add_argument("--measure-step", action="store_true", help="time the reference's step on the CPU too (default: only on cuda)")
    parser.add_argument("--skip-building", action="store_true", help="leave out (a)'s scenario builds (default: time them)")
    args = parser.parse_args(argv)
    if missing := device_missing(args.device):
        parser.error(f"--device cuda: {missing}")

    load_before, wall_before, cpu_before = os.getloadavg()[0], time.perf_counter(), time.process_time()
    started = time.perf_counter()
    setting = Inputs(model=args.model, seed=args.seed).setting(args.family, args.dtype, args.device)  # seeds the weights if not cached
    resolving = time.perf_counter() - started
    arm = get_scenario("packed_vs_unpacked").build(setting)["packed"]
    params = sum(torch.Size(shape).numel() for shape in checkpoint_shapes(arm.model.checkpoint).values())
    print(f"harness overhead: --model {args.model} --family {args.family} --device {args.device} --dtype {args.dtype}: "
          f"{params / 1e9:.3f}B parameters, packed arm {len(arm.samples)} samples of "
          f"{sum(len(s.input_ids) for s in arm.samples)} tokens, rows of {arm.layout.seq_len}; torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}, {torch.get_num_threads()} threads", flush=True)
    print(f"(a) resolving --model (the weights seeded into the checkpoint cache unless there already: once per family/size/seed "
          f"on a machine): {resolving:.2f} s", flush=True)

    parts: dict[str, float] = {}
    if not args.skip_building:
        built = building(setting, args.repeat)
        per_arm = [seconds for seconds, _ in built["per_arm"].values()]
        worst = max(built["per_arm"], key=lambda name: built["per_arm"][name][0])
        print(f"(a) building: the first build of every scenario {built['cold_first_build_s']:.2f} s; per arm median "
              f"{statistics.median(per_arm) * 1e3:.2f} ms, worst {worst} {built['per_arm'][worst][0] * 1e3:.2f} ms; "
              f"not built here: {', '.join(built['skipped']) or 'none'}", flush=True)
        parts["a_build"] = statistics.median(per_arm)
    first_submit, parts["a_submit"] = submitting(arm, args.repeat)
    print(f"(a) submitting an arm to its launch (private checkpoint + case.json): the launch's first {first_submit:.3f} s, "
          f"each later one {parts['a_submit']:.4f} s", flush=True)

    dtype = DTYPES[args.dtype]
    if args.device == "cuda":
        moved = device_transfer(arm, dtype, args.repeat)
        how = "shared through CUDA IPC, copied on the GPU"
    else:
        moved = transfer(arm, fake_result(arm, dtype, args.device, seed=1), args.repeat)
        how = "through safetensors on disk"
    for key in ("rank_validate_s", "rank_save_s", "harness_load_s", "harness_validate_s"):
        parts[f"b_{key[:-2]}"] = moved[key]
    print(f"(b) transfer of {moved['bytes'] / 2**30:.2f} GiB of gradients, {how}: rank validate {moved['rank_validate_s']:.3f} s, "
          f"rank save {moved['rank_save_s']:.3f} s, harness load {moved['harness_load_s']:.3f} s, "
          f"harness validate {moved['harness_validate_s']:.3f} s",
          flush=True)
    reference = moved.pop("loaded")
    other = moved.pop("other", None) or StepResult(
        logprobs=[lp * (1 + 1e-3) for lp in reference.logprobs], loss=reference.loss, num_loss_tokens=reference.num_loss_tokens,
        grads={name: g * (1 + 1e-3) for name, g in reference.grads.items()})
    compare_s, rows = comparison(arm, other, reference, args.dtype, args.repeat)
    parts["c_compare_per_arm"] = compare_s / 2
    batched = batchable([(other.grads[name], reference.grads[name]) for name in reference.grads])
    print(f"(c) compare_results of two arms ({len(rows)} comparisons, on the {'GPU' if args.device == 'cuda' else 'CPU'}, the gradients "
          f"{'in batches (batched_error_sums)' if batched else 'one tensor at a time (error_sums)'}): "
          f"{compare_s:.3f} s", flush=True)
    add_s, write_s, encode_s = recording(rows, setting, args.repeat)
    parts["d_record"] = add_s + write_s / len(SCENARIOS)
    print(f"(d) recording the verdict: appended to results.jsonl {add_s * 1e3:.2f} ms (of it the line's JSON {encode_s * 1e3:.2f} ms, "
          f"the rest the write and its fsync); results.json and its tables, written "
          f"once a run, {write_s * 1e3:.2f} ms here (counted per verdict over a family's {len(SCENARIOS)}: an upper bound per arm)",
          flush=True)
    del other, reference

    step = args.engine_step_seconds
    if step is None and (args.device == "cuda" or args.measure_step):
        try:
            step, loading = engine_step(arm, args.repeat)
            print(f"engine step (the reference's engine.run on the packed arm): {step:.3f} s, of which loading the checkpoint "
                  f"{loading:.3f} s; without it {step - loading:.3f} s (the % below are of the whole step)", flush=True)
        except Exception as err:  # noqa: BLE001 - the harness's figures above stand; pass --engine-step-seconds instead
            print(f"engine step: the reference failed ({type(err).__name__}: {err}); give --engine-step-seconds", flush=True)
    total = sum(parts.values())
    print("\npart                     seconds/arm" + ("   % of step" if step else ""))
    for name, seconds in parts.items():
        print(f"{name:24s} {seconds:11.4f}" + (f"   {100 * seconds / step:8.2f}%" if step else ""))
    print(f"{'total':24s} {total:11.4f}" + (f"   {100 * total / step:8.2f}%  (engine step {step:.3f} s)" if step else ""))
    # a shared machine's other load shows here: CPU seconds far below wall x threads means this process waited
    print(f"\nload average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; this process: "
          f"{time.process_time() - cpu_before:.1f} CPU s in {time.perf_counter() - wall_before:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
