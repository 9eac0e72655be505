"""What the guard costs in a real training loop, and whether it tells right from wrong at real size (issue 46).

A plain padding-free loop (rows of `--row` tokens packed from documents of random lengths, a 1-token one among them,
labels masked at each document's first token as DataCollatorWithFlattening does; AdamW) runs `--steps` steps twice,
side by side: guard off (the baseline), then guard on (its default: the first batch, and every batch that grows the
regime), on_failure="warn" so that a false alarm is counted, not fatal. Then the guard checks the first batch of the same
model with one packing bug seeded (position_ids dropped before the model). Prints one JSON object: the medians of the
step times, the checks' times, the guard's share of the run, the peak GPU memory of each, the verdicts.

    python3 benchmarks/guard_cost.py --model 0.6b --device cuda --dtype bfloat16 --row 4096 --steps 100
    python3 benchmarks/guard_cost.py --model tiny --device cpu --dtype float32 --row 256 --steps 5      # the script itself
    python3 benchmarks/guard_cost.py --trainer ...    # the same in transformers' Trainer, the guard as its callback

With --trainer the loop is transformers' Trainer (DataCollatorWithFlattening over documents of random lengths, about
`--row` tokens a batch; AdamW; no autocast) and the guard its PackingGuardCallback; the times are the Trainer's
train_runtime, guard off and on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from packcheck.guard import Guard, GuardFailure

SHAPES = {  # Qwen3-0.6B's shapes (its config.json), weights drawn at random; tiny for trying the script on a CPU
    "0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "tiny": dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, tie_word_embeddings=True),
}


class PositionsDropped(Qwen3ForCausalLM):
    """The seeded bug: position_ids never reach the model (a port or wrapper that forgets them)."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def model_of(cls, size: str, dtype: torch.dtype, device: str):
    torch.manual_seed(0)
    config = Qwen3Config(**SHAPES[size], max_position_embeddings=40960, use_cache=False, attn_implementation="sdpa")
    with torch.device(device):
        return cls(config).to(dtype)


def batches(steps: int, row: int, vocab: int, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        lengths, left = [1] if step == 0 else [], row - (1 if step == 0 else 0)
        while left:
            n = min(left, int(torch.randint(2, max(3, row // 3), (1,), generator=g)))
            lengths.append(n)
            left -= n
        ids = torch.randint(0, vocab, (1, row), generator=g)
        positions = torch.cat([torch.arange(n) for n in lengths])[None]
        labels = ids.clone()
        labels[positions == 0] = -100
        yield {"input_ids": ids.to(device), "position_ids": positions.to(device), "labels": labels.to(device)}


def loop(model, data, guard: Guard | None, device: str) -> dict:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    steps, checks = [], []
    for batch in data:
        if guard is not None:
            _sync(device)
            started = time.perf_counter()
            if guard(model, batch) is not None:
                _sync(device)
                checks.append(time.perf_counter() - started)
        _sync(device)
        started = time.perf_counter()
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        steps.append(time.perf_counter() - started)
    return {"steps": steps, "checks": checks}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak(device: str) -> float | None:
    if not device.startswith("cuda"):
        return None
    peak = torch.cuda.max_memory_allocated() / 2 ** 30
    torch.cuda.reset_peak_memory_stats()
    return round(peak, 2)


def documents(steps: int, row: int, vocab: int, seed: int = 0) -> tuple[list[dict], int]:
    """Documents of random lengths, 1 to row/3 tokens, and how many make a batch of about `row` tokens."""
    g = torch.Generator().manual_seed(seed)
    per_batch = 6
    lengths = torch.randint(1, max(2, row // 3), (steps * per_batch,), generator=g)
    lengths = (lengths * (row * steps * per_batch / per_batch) / lengths.sum()).clamp(1, row).long()  # rows of ~`row` tokens
    return [{"input_ids": torch.randint(0, vocab, (int(n),), generator=g).tolist()} for n in lengths], per_batch


def trainer_run(cls, args, dtype, vocab: int, guard: bool, cases: str) -> tuple[float, list]:
    from transformers import DataCollatorWithFlattening, Trainer, TrainingArguments

    from packcheck.guard.transformers_callback import PackingGuardCallback

    data, per_batch = documents(args.steps, args.row, vocab)
    callback = PackingGuardCallback(case_dir=cases, on_failure="warn")
    trainer = Trainer(model=model_of(cls, args.model, dtype, args.device),
                      args=TrainingArguments(output_dir=cases, per_device_train_batch_size=per_batch, max_steps=args.steps,
                                             learning_rate=1e-5, report_to=[], save_strategy="no", logging_steps=args.steps,
                                             use_cpu=not args.device.startswith("cuda"), dataloader_num_workers=0, disable_tqdm=True,
                                             seed=0),
                      train_dataset=data, data_collator=DataCollatorWithFlattening(), callbacks=[callback] if guard else [])
    runtime = trainer.train().metrics["train_runtime"]
    return runtime, (callback.guard.verdicts if guard else [])


def trainer_main(args, dtype, vocab: int, found: dict) -> None:
    with tempfile.TemporaryDirectory() as cases:
        off, _ = trainer_run(Qwen3ForCausalLM, args, dtype, vocab, False, cases)
        found["peak_gib_off"] = _peak(args.device)
        on, verdicts = trainer_run(Qwen3ForCausalLM, args, dtype, vocab, True, cases)
        found["peak_gib_on"] = _peak(args.device)
        checks = [v.seconds for v in verdicts]
        found |= {"train_runtime_s_off": off, "train_runtime_s_on": on, "run_ratio_on_off": on / off, "checks": len(checks),
                  "check_s": checks, "guard_share_of_run": sum(checks) / off,
                  "verdicts": [{"passed": v.passed, "documents": len(v.documents), "tokens": sum(v.documents), "longest": max(v.documents),
                                "worst": v.worst.quantity + (" " + v.worst.item if v.worst.item else ""), "margin": v.worst.margin,
                                "timings": v.timings} for v in verdicts]}
        _, caught = trainer_run(PositionsDropped, argparse.Namespace(**{**vars(args), "steps": 1}), dtype, vocab, True, cases)
        found["mutant"] = [{"passed": v.passed, "where": v.where, "diagnosis": v.diagnosis, "shrunk_to": list(v.documents),
                            "seconds": v.seconds} for v in caught]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="0.6b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--row", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--trainer", action="store_true", help="transformers' Trainer with the guard's callback")
    args = parser.parse_args()
    dtype, vocab = getattr(torch, args.dtype), SHAPES[args.model]["vocab_size"]
    found: dict = {"model": args.model, "device": args.device, "dtype": args.dtype, "row": args.row, "steps": args.steps,
                   "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None, "torch": torch.__version__,
                   "loop": "Trainer" if args.trainer else "plain"}
    if args.trainer:
        trainer_main(args, dtype, vocab, found)
        print(json.dumps(found, indent=1, default=float))
        return
    with tempfile.TemporaryDirectory() as cases:
        off = loop(model_of(Qwen3ForCausalLM, args.model, dtype, args.device), batches(args.steps, args.row, vocab, args.device), None, args.device)
        found["peak_gib_off"] = _peak(args.device)
        guard = Guard(on_failure="warn", case_dir=cases, out=None)
        on = loop(model_of(Qwen3ForCausalLM, args.model, dtype, args.device), batches(args.steps, args.row, vocab, args.device), guard, args.device)
        found["peak_gib_on"] = _peak(args.device)
        total_off, total_on = sum(off["steps"]), sum(on["steps"]) + sum(on["checks"])
        found |= {"step_median_s_off": statistics.median(off["steps"]), "step_median_s_on": statistics.median(on["steps"]),
                  "run_s_off": total_off, "run_s_on": total_on, "checks": len(on["checks"]), "check_s": on["checks"],
                  "guard_share_of_run": sum(on["checks"]) / total_off, "run_ratio_on_off": total_on / total_off,
                  "verdicts": [{"passed": v.passed, "documents": len(v.documents), "longest": max(v.documents),
                                "worst": v.worst.quantity + (" " + v.worst.item if v.worst.item else ""), "margin": v.worst.margin,
                                "bound": v.worst.bound.describe(), "timings": v.timings} for v in guard.verdicts]}
        mutant = model_of(PositionsDropped, args.model, dtype, args.device)
        started = time.perf_counter()
        try:
            Guard(case_dir=cases).check(mutant, next(batches(1, args.row, vocab, args.device)))
            found["mutant"] = {"caught": False}
        except GuardFailure as failure:
            v = failure.verdict
            found["mutant"] = {"caught": True, "where": v.where, "diagnosis": v.diagnosis, "shrunk_to": list(v.documents),
                               "worst_margin": v.worst.margin, "seconds": time.perf_counter() - started}
        found["peak_gib_mutant"] = _peak(args.device)
    print(json.dumps(found, indent=1, default=float))


if __name__ == "__main__":
    main()
