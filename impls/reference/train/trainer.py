"""The reference trainer as a real trainer: a tiny byte-level LM trained for N steps on the stdlib.

Every step is a harness Case (a global batch of stdlib byte samples, packed layout, cut into
micro-batches of uneven token counts) run through `packcheck.impls.reference.step.train_step.accumulate_gradients`,
the very code the reference engine runs for the conformance suite; the model and an AdamW
optimizer (warmup + cosine schedule, optional gradient clipping) persist across steps. The loss is
the token mean over the global batch, as in every Case. The validation loss, on held-out files,
is computed every `--eval-every` steps through the same row builder, forward only.

Printed rows: `train loss` is the mean of the step losses since the previous row; `tok/s` counts
sample bytes (no padding) per second of training steps (data, packing, forward, backward,
optimizer), evaluation excluded. `--out DIR` writes
`curve.json` (every step, plus config and provenance) and the final weights as `model.safetensors`
+ `config.json` with Hugging Face names, loadable by `AutoModelForCausalLM.from_pretrained(DIR)`.

    1. python -m packcheck.impls.reference.train --threads 1 --out reports/train            # the run in docs/training.md
    2. python -m packcheck.impls.reference.train --steps 20 --warmup 5 --max-files 200   # a quick look
    3. python -m packcheck.impls.reference.train --family qwen3 --dtype float64 --steps 50 --warmup 5
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Sequence

import torch
from safetensors.torch import save_file

from packcheck.harness.contract import Case, Partition, Sample, packed
from packcheck.harness.models import model_spec
from packcheck.harness.provenance import provenance
from packcheck.impls.reference.data.predictions import Predictions, label_logprobs
from packcheck.impls.reference.engine import DTYPES, ReferenceEngine
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.step.train_step import accumulate_gradients, build_micro_batches
from packcheck.impls.reference.train.corpus import VOCAB_SIZE, split_corpus
from packcheck.impls.reference.train.schedule import WarmupCosine

CURVE_SCHEMA = "packcheck.train_curve/1"


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    family: str = "llama"
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    dtype: str = "float32"
    seed: int = 0
    steps: int = 200
    seq_len: int = 512
    batch_tokens: int = 6144
    micro_batches: int = 3
    min_len: int = 16
    max_len: int = 400
    lr: float = 3e-3
    warmup: int = 20
    final_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    clip: float = 1.0
    eval_every: int = 20
    log_every: int = 10
    val_tokens: int = 32768
    val_percent: int = 10
    max_files: int | None = None
    threads: int = 0


HELP = {
    "family": "model family (packcheck.harness.models)",
    "hidden_size": "model width",
    "intermediate_size": "MLP width",
    "num_hidden_layers": "decoder layers",
    "num_attention_heads": "query heads",
    "num_key_value_heads": "key/value heads (grouped-query attention)",
    "dtype": "parameter and compute dtype",
    "seed": "seeds the initial weights, the corpus chunking and order, and the micro-batch cuts",
    "steps": "optimizer steps",
    "seq_len": "packed row length in tokens",
    "batch_tokens": "global batch size in tokens: whole samples are added while they fit",
    "micro_batches": "micro-batches per step, cut at seeded random points so their token counts differ",
    "min_len": "shortest chunk of a file, in bytes",
    "max_len": "longest chunk of a file, in bytes (at most --seq-len)",
    "lr": "peak learning rate",
    "warmup": "linear warmup steps",
    "final_lr_ratio": "final learning rate as a fraction of the peak (cosine floor)",
    "weight_decay": "AdamW weight decay on matrices (not on norms)",
    "clip": "clip the global gradient norm to this; 0 disables",
    "eval_every": "steps between validation losses (and after the last step)",
    "log_every": "steps between printed rows",
    "val_tokens": "size of the validation set in bytes",
    "val_percent": "percent of stdlib files held out for validation",
    "max_files": "use only the first N stdlib files, sorted (small runs and tests); default all",
    "threads": "CPU threads for torch; 0 keeps torch's default (one per core). On a shared machine 1 is often faster",
}


def uneven_partition(num_samples: int, micro_batches: int, rng: random.Random) -> Partition:
    """Contiguous micro-batches cut at random points: their sample and token counts differ."""
    cuts = sorted(rng.sample(range(1, num_samples), min(micro_batches, num_samples) - 1))
    bounds = [0, *cuts, num_samples]
    return Partition.single_rank([range(a, b) for a, b in zip(bounds, bounds[1:])])


def partition_by_tokens(samples: Sequence[Sample], max_tokens: int) -> Partition:
    """Contiguous micro-batches of whole samples, each at most `max_tokens` (or one sample)."""
    groups, tokens = [[]], 0
    for index, sample in enumerate(samples):
        if groups[-1] and tokens + len(sample.input_ids) > max_tokens:
            groups.append([])
            tokens = 0
        groups[-1].append(index)
        tokens += len(sample.input_ids)
    return Partition.single_rank(groups)


@torch.no_grad()
def evaluate(model: CausalLM, micro_batches: Sequence[Sequence[Predictions]], attention: str) -> float:
    """Token-mean loss over all the rows, forward only."""
    device = next(model.parameters()).device
    total, tokens = 0.0, 0
    for forwards in micro_batches:
        for predictions in forwards:
            p = predictions.to(device)
            logits_BTV = model(p.input_ids_BT, p.position_ids_BT, p.segment_ids_BT, attention)
            lp_BT = label_logprobs(logits_BTV, p.label_BT)
            mask_BT = p.label_mask_BT.to(lp_BT.dtype)
            total -= (lp_BT * mask_BT).sum().item()
            tokens += int(mask_BT.sum())
    return total / tokens


def adamw(model: CausalLM, config: TrainConfig) -> torch.optim.AdamW:
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]  # norm scales: decaying them pulls them to 0, not to 1
    groups = [{"params": matrices, "weight_decay": config.weight_decay}, {"params": vectors, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95))


def save_checkpoint(model: CausalLM, source: str, config: TrainConfig, directory: Path) -> None:
    """The weights under their Hugging Face names, and the source checkpoint's config.json."""
    hf_config = json.loads((Path(source) / "config.json").read_text())
    hf_config["dtype"] = config.dtype
    (directory / "config.json").write_text(json.dumps(hf_config, indent=2))
    tensors = {name: p.detach().cpu().contiguous() for name, p in model.named_parameters()}
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})


def train(config: TrainConfig, out: Path | None = None, log: Callable[[str], None] = print, command: list[str] | None = None) -> dict:
    """Train, print the curve through `log`, write `out` if given; return the curve."""
    assert config.max_len <= config.seq_len, "a chunk longer than a packed row cannot be packed"
    started = time.perf_counter()
    if config.threads:
        torch.set_num_threads(config.threads)
    spec = model_spec(
        config.family, seed=config.seed, vocab_size=VOCAB_SIZE, hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, num_key_value_heads=config.num_key_value_heads,
        head_dim=config.hidden_size // config.num_attention_heads, max_position_embeddings=config.seq_len,
    )
    model = CausalLM.from_checkpoint(spec.checkpoint, DTYPES[config.dtype])
    engine = ReferenceEngine()
    optimizer = adamw(model, config)
    schedule = WarmupCosine(peak=config.lr, warmup=config.warmup, total=config.steps, final_ratio=config.final_lr_ratio)
    train_corpus, val_corpus = split_corpus(val_percent=config.val_percent, max_files=config.max_files,
                                            min_len=config.min_len, max_len=config.max_len)
    layout = packed(config.seq_len)

    val_samples = val_corpus.first_samples(config.val_tokens, config.seed)
    val_case = Case(name="validation", model=spec, samples=val_samples, layout=layout, dtype=config.dtype,
                    partition=partition_by_tokens(val_samples, config.batch_tokens))
    engine.require_supported(val_case)
    attention = engine.attention_backend(val_case)
    val_rows = build_micro_batches(val_case, engine.pipeline)

    num_parameters = sum(p.numel() for p in model.parameters())
    log(f"model: {config.family} {num_parameters:,} parameters, {config.dtype}; corpus: {len(train_corpus.files)} train / "
        f"{len(val_corpus.files)} validation stdlib files; validation set {sum(len(s.input_ids) for s in val_samples):,} bytes "
        f"in {len(val_samples)} samples")
    log(f"{'step':>5} {'lr':>9} {'train loss':>10} {'val loss':>9} {'tok/s':>7}")
    points = [{"step": 0, "val_loss": evaluate(model, val_rows, attention)}]
    log(f"{0:>5} {'':>9} {'':>10} {points[0]['val_loss']:>9.4f} {'':>7}")

    batches = train_corpus.batches(config.seed, config.batch_tokens)
    cut_rng = random.Random(config.seed)
    since_row = []
    for step in range(1, config.steps + 1):
        tick = time.perf_counter()
        samples = next(batches)
        case = Case(name=f"train-{step}", model=spec, samples=samples, layout=layout, dtype=config.dtype,
                    partition=uneven_partition(len(samples), config.micro_batches, cut_rng))
        lr = schedule(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss, loss_tokens, _ = accumulate_gradients(model, case, engine.pipeline, attention)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip if config.clip > 0 else math.inf)
        optimizer.step()
        seconds = time.perf_counter() - tick
        point = {
            "step": step, "lr": lr, "train_loss": loss, "grad_norm": grad_norm.item(), "seconds": seconds,
            "tokens": sum(len(s.input_ids) for s in samples), "loss_tokens": loss_tokens,
            "micro_batch_tokens": [sum(len(samples[i].input_ids) for i in mb) for mb in case.partition.micro_batches],
        }
        since_row.append(point)
        if step % config.eval_every == 0 or step == config.steps:
            point["val_loss"] = evaluate(model, val_rows, attention)
        points.append(point)
        if step % config.log_every == 0 or "val_loss" in point:
            mean_loss = sum(p["train_loss"] for p in since_row) / len(since_row)
            throughput = sum(p["tokens"] for p in since_row) / sum(p["seconds"] for p in since_row)
            val = f"{point['val_loss']:>9.4f}" if "val_loss" in point else f"{'':>9}"
            log(f"{step:>5} {lr:>9.2e} {mean_loss:>10.4f} {val} {throughput:>7.0f}")
            since_row = []

    wall_s = time.perf_counter() - started
    log(f"wall time {wall_s:.1f} s")
    curve = {
        "schema": CURVE_SCHEMA, "config": asdict(config), "model": spec.to_json(), "num_parameters": num_parameters,
        "provenance": provenance(command=command), "wall_s": wall_s, "points": points,
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "curve.json").write_text(json.dumps(curve, indent=1))
        save_checkpoint(model, spec.checkpoint, config, out)
        log(f"wrote {out}/curve.json, {out}/model.safetensors, {out}/config.json")
    return curve


def parse_args(argv: Sequence[str] | None) -> tuple[TrainConfig, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m packcheck.impls.reference.train", description=__doc__.split("\n")[0])
    for field in fields(TrainConfig):
        kind = int if field.name == "max_files" else type(field.default)
        choices = sorted(DTYPES) if field.name == "dtype" else None
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=field.default, choices=choices,
                            help=f"{HELP[field.name]} (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="write curve.json and the final checkpoint here (default: none)")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    return TrainConfig(**args), out


def main(argv: Sequence[str] | None = None) -> int:
    config, out = parse_args(argv)
    train(config, out, command=["python", "-m", "packcheck.impls.reference.train", *(sys.argv[1:] if argv is None else argv)])
    return 0
