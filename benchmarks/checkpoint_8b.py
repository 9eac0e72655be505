"""The 8B checkpoint's cost, measured where it is made: drawing the weights, writing them, hashing them.

    PACKCHECK_CACHE_DIR=/tmp/pccache python3 benchmarks/checkpoint_8b.py --family llama --out $OUT/checkpoint-llama.json

1. same bits: the portable generator (harness/models/portable_normal.py) on the GPU against the CPU, 2^20 values of
   two keys and the first values of the largest tensor: equal bit for bit, or the bfloat16 checkpoints would depend on
   the machine that drew them;
2. drawing: every tensor of the preset drawn on the GPU and rounded to bfloat16, written nowhere (seconds);
3. building: `resolve_model(family, "8b")` into the cache, as a run does (draw, save_file, one sha256 pass), if the
   entry is not there yet;
4. hashing: one more sha256 pass over the entry (harness/models/cache_seal.py `digests`), for the rate a run pays per
   check and per launch's private copy.

Prints one JSON object (and writes it to --out): every time in seconds, the entry's bytes, the hash rate.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import zlib
from pathlib import Path

import torch

from packcheck.harness.models.cache_seal import digests
from packcheck.harness.models.checkpoint import parameter_shapes, portable_tensor, scaled
from packcheck.harness.models.portable_normal import portable_normal
from packcheck.harness.models.sizes import planned_checkpoint, resolve_model


def same_bits(shapes: dict[str, tuple[int, ...]], device: str) -> dict[str, bool]:
    checks = {}
    for key in (0, zlib.crc32(b"1234:model.embed_tokens.weight")):
        checks[f"key {key}, 2^20 values"] = torch.equal(portable_normal(key, 1 << 20, device).cpu(), portable_normal(key, 1 << 20, "cpu"))
    name = max(shapes, key=lambda n: math.prod(shapes[n]))
    first = min(1 << 16, math.prod(shapes[name]))  # the CPU draws only these of the largest tensor (all of it takes minutes there): same key, same indices
    gpu = portable_tensor(name, shapes[name], 1234, device).to(torch.float32).to(torch.bfloat16).flatten()[:first].cpu()
    cpu = scaled(name, shapes[name], portable_normal(zlib.crc32(f"1234:{name}".encode()), first, "cpu"))
    checks[f"{name}, first 2^16 values in bfloat16"] = torch.equal(gpu, cpu.to(torch.float32).to(torch.bfloat16))
    return checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="llama")
    parser.add_argument("--model", default="8b")
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--device", default="cuda", help="where the weights are drawn (default cuda; cpu: a dry run of this script)")
    args = parser.parse_args()
    planned = planned_checkpoint(args.family, args.model)
    shapes = parameter_shapes(args.family, planned.config)
    report: dict = {"family": args.family, "model": args.model, "parameters": sum(math.prod(s) for s in shapes.values()),
                    "weights": planned.weights, "entry": str(planned.path), "existed": (planned.path / "model.safetensors").exists()}
    report["same_bits"] = same_bits(shapes, args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    sync()
    started = time.perf_counter()
    for name, shape in shapes.items():
        portable_tensor(name, shape, 1234, args.device).to(torch.float32).to(torch.bfloat16)
    sync()
    report["draw_s"] = time.perf_counter() - started
    if args.device == "cuda":
        torch.cuda.empty_cache()
    started = time.perf_counter()
    entry = Path(resolve_model(args.family, args.model).spec.checkpoint)
    report["build_s"] = time.perf_counter() - started  # draw + copy to the host + save_file + one sha256 pass (0 if cached: a check)
    report["bytes"] = sum(p.stat().st_size for p in entry.iterdir())
    started = time.perf_counter()
    digests(entry)
    report["sha256_s"] = time.perf_counter() - started
    report["sha256_GB_per_s"] = report["bytes"] / 1e9 / report["sha256_s"]
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
