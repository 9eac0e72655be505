"""The distribution of (kernel error / same-precision reference error) against the float64 oracle, over the correct
kernels this machine runs, per output: what K in harness/kernels/tolerance.py is chosen from (docs/kernels.md).

    python3 benchmarks/kernel_k.py [--cases 40] [--device cpu] [--kernels sdpa flex conv1d] [--head-dims 8,16,...]

On a GPU, the correct CUDA kernels: `--device cuda --kernels sdpa torch-varlen flex`.
"""

from __future__ import annotations

import argparse
import random

import torch

from packcheck.harness.compare.metrics import rel_l2
from packcheck.harness.kernels.evaluate import evaluate, rounded
from packcheck.harness.kernels.example import DTYPES
from packcheck.harness.kernels.oracles import Packing
from packcheck.harness.kernels.registry import KERNELS
from packcheck.harness.kernels.shapes import HEAD_DIMS, Case, Configuration


def ratios(name: str, dtype: str, n: int, device: str, head_dims: tuple[int, ...]) -> list[float]:
    kernel, rng, found = KERNELS[name], random.Random(0), []
    call, spec, torch_dtype = kernel.load(device), kernel.kind.value, DTYPES[dtype]
    backward = device in kernel.backward_on
    for i in range(n):
        configuration = Configuration(head_dim=rng.choice(head_dims), ratio=rng.choice(spec.ratios))
        case = Case(configuration=configuration, kv_heads=rng.randint(1, 2), documents=tuple(rng.randint(2, 40) for _ in range(rng.randint(1, 4))))
        inputs, packing = rounded(spec.inputs(case, i), torch_dtype), Packing.of(case.documents, case.head_dim, device)
        got, oracle, reference = (evaluate(f, inputs, packing, d, device, backward) for f, d in
                                  ((call, torch_dtype), (spec.oracle, torch.float64), (spec.oracle, torch_dtype)))
        found += [rel_l2(got[k], oracle[k]) / rel_l2(reference[k], oracle[k]) for k in oracle if rel_l2(reference[k], oracle[k]) > 0]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40, help="cases per kernel and dtype")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--kernels", nargs="+", default=["sdpa", "flex", "conv1d"])
    parser.add_argument("--head-dims", default=",".join(map(str, HEAD_DIMS)))
    args = parser.parse_args()
    torch.set_num_threads(1)
    head_dims = tuple(int(d) for d in args.head_dims.split(","))
    everything = []
    for name in args.kernels:
        for dtype in ("float32", "bfloat16"):
            try:
                found = sorted(ratios(name, dtype, args.cases, args.device, head_dims))
            except Exception as err:  # noqa: BLE001 - a kernel without this dtype (torch's varlen: no float32) is said and skipped
                print(f"{name:7s} {dtype:9s} not measured: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
                continue
            everything += found
            q = lambda p: found[min(len(found) - 1, int(p * len(found)))]  # noqa: E731
            print(f"{name:7s} {dtype:9s} n={len(found):4d} min {found[0]:.2f} median {q(0.5):.2f} p99 {q(0.99):.2f} max {found[-1]:.2f}")
    print(f"all: n={len(everything)} max {max(everything):.2f}")


if __name__ == "__main__":
    main()
