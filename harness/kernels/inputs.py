"""The seeded inputs of one case, per kind of kernel, in float64 on the CPU: the tensors the kernel takes and the weight
of each output (the gradient that flows back into it: the loss is sum(output x weight)).

One generator per case, seeded from the run's seed and the case itself, so a case draws the same numbers wherever it
is met (generated, shrunk, or rerun alone by its reproduce command). Shapes: N tokens, H heads, K kv heads, D head dim,
S documents, C channels, W convolution width.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from packcheck.harness.kernels.shapes import CONV_WIDTH, Case


@dataclass(frozen=True, slots=True)
class Inputs:
    tensors: dict[str, torch.Tensor]  # what the kernel takes, every one differentiable
    weights: dict[str, torch.Tensor]  # per output: d loss / d output


def generator_for(case: Case, seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(repr((seed, case)).encode()))


def attention_inputs(case: Case, seed: int) -> Inputs:
    gen, N, H, K, D = generator_for(case, seed), case.tokens, case.heads, case.kv_heads, case.head_dim

    def normal(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    return Inputs({"q": normal(N, H, D), "k": normal(N, K, D), "v": normal(N, K, D)}, {"out": normal(N, H, D)})


def delta_rule_inputs(case: Case, seed: int) -> Inputs:
    gen, N, H, D, S = generator_for(case, seed), case.tokens, case.heads, case.head_dim, len(case.documents)

    def normal(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    # q and k arrive l2-normalised (the GatedDeltaNet normalises them before the kernel); the decay g = log sigmoid < 0
    return Inputs({"q": F.normalize(normal(N, H, D), dim=-1), "k": F.normalize(normal(N, H, D), dim=-1), "v": normal(N, H, D),
                   "g": F.logsigmoid(normal(N, H)), "beta": torch.sigmoid(normal(N, H))},
                  {"out": normal(N, H, D), "final_state": normal(S, H, D, D)})


def short_conv_inputs(case: Case, seed: int) -> Inputs:
    gen, N, C = generator_for(case, seed), case.tokens, case.heads * case.head_dim

    def normal(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    return Inputs({"x": normal(N, C), "weight": normal(C, CONV_WIDTH) / CONV_WIDTH ** 0.5}, {"out": normal(N, C)})
