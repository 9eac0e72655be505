"""One configuration of a kernel searched: hypothesis draws its cases (packings and kv head counts, packings.py), each
judged against the oracle (example.py); the first failing case is shrunk by hypothesis's own shrinker to the smallest
one that still fails. Run from a `random.Random(seed)` with no example database: the same seed draws the same cases.

On CUDA an attention configuration also meets one row past 65,536 tokens (`long_row`), judged as drawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from packcheck.harness.kernels.evaluate import KernelCall
from packcheck.harness.kernels.example import Example, judge_example
from packcheck.harness.kernels.packings import cases
from packcheck.harness.kernels.registry import Kernel, Kind
from packcheck.harness.kernels.shapes import LONG_ROW, Case, Configuration

LONG_DOCUMENT = 4096


@dataclass(frozen=True, kw_only=True, slots=True)
class Searched:
    examples: tuple[Example, ...]  # every case judged, in order
    shrunk: Example | None  # the smallest failing case; None where none failed

    @property
    def worst(self) -> Example:
        return max(self.examples, key=lambda e: e.margin)


def long_row(configuration: Configuration) -> Case:
    """1, 2 and 3 tokens, then 4,096-token documents, to past 65,536 tokens in one row."""
    documents = (1, 2, 3) + (LONG_DOCUMENT,) * -(-(LONG_ROW - 6) // LONG_DOCUMENT)
    return Case(configuration=configuration, kv_heads=1, documents=documents)


def search(kernel: Kernel, call: KernelCall, configuration: Configuration, dtype: str, device: str, seed: int, examples: int,
           shrink: bool = True) -> Searched:
    judged: dict[Case, Example] = {}

    def fails(case: Case) -> bool:
        if case not in judged:
            judged[case] = judge_example(kernel, call, case, dtype, device, seed)
        return judged[case].failed

    if device == "cuda" and kernel.kind is Kind.ATTENTION:
        fails(long_row(configuration))
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    try:
        smallest = find(cases(configuration), fails, random=random.Random(seed),
                        settings=settings(database=None, max_examples=examples, deadline=None, phases=phases,
                                          suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        smallest = next((c for c, e in judged.items() if e.failed), None)  # the long row alone, or shrinking off
    return Searched(examples=tuple(judged.values()), shrunk=None if smallest is None else judged[smallest])


def judge_one(kernel: Kernel, call: KernelCall, case: Case, dtype: str, device: str, seed: int) -> Searched:
    """Exactly one case (a verdict's reproduce command: --kv-heads and --documents given)."""
    example = judge_example(kernel, call, case, dtype, device, seed)
    return Searched(examples=(example,), shrunk=example if example.failed else None)
