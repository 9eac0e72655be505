"""The benchmark's data: a long-tailed document-length distribution packed greedily into rows, as one
harness Case per training step (so the reference arms train through the very step the suite checks).

Lengths are log-normal (median `median`, log-space spread `sigma`) clipped to [1, row length]; a
`ones` fraction of the documents has exactly 1 token and one document exactly fills a row. The pool
is packed first-fit decreasing into rows of `row_tokens`; rows are shuffled (seeded) and dealt
`rows_per_step` to a step, and inside a step put back in the order first-fit opened them: then
every document of a later row was too long for the free space of each earlier one, so the
reference's in-order packer (packing.pack_rows) rebuilds exactly these rows (checked here).
Rows left over once the steps are dealt are not used.

Packing efficiency = document tokens / row slots of the rows trained on. The padding baseline is
one document per row, padded to the row length: document tokens / (documents x row length).
Every token is a random id; every token but a document's first is a loss target.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import torch

from packcheck.harness.contract import Case, ModelSpec, Partition, Sample, packed
from packcheck.impls.reference.data.packing import pack_rows


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchData:
    cases: list[Case]  # one per step
    rows: list[list[list[int]]]  # the document lengths of each row of each step
    row_tokens: int
    rows_per_step: int

    def step_lengths(self, step: int) -> list[int]:
        return [n for row in self.rows[step] for n in row]

    def stats(self, first_step: int = 0) -> dict:
        """Packing over the steps from `first_step` on (the timed ones)."""
        lengths = [n for step in range(first_step, len(self.rows)) for n in self.step_lengths(step)]
        rows = sum(len(self.rows[s]) for s in range(first_step, len(self.rows)))
        tokens = sum(lengths)
        return {
            "documents": len(lengths), "document_tokens": tokens, "rows": rows,
            "documents_per_row": len(lengths) / rows,
            "packing_efficiency": tokens / (rows * self.row_tokens),
            "padding_baseline_efficiency": tokens / (len(lengths) * self.row_tokens),
            "length_1_documents": sum(n == 1 for n in lengths),
            "row_length_documents": sum(n == self.row_tokens for n in lengths),
            "median_length": sorted(lengths)[len(lengths) // 2], "mean_length": tokens / len(lengths), "max_length": max(lengths),
        }


def document_lengths(rng: random.Random, total_tokens: int, row_tokens: int, median: float, sigma: float, ones: float) -> list[int]:
    lengths = [row_tokens]  # one document exactly fills a row
    while sum(lengths) < total_tokens:
        length = 1 if rng.random() < ones else round(math.exp(rng.gauss(math.log(median), sigma)))
        lengths.append(min(max(length, 1), row_tokens))
    return lengths


def first_fit_decreasing(lengths: list[int], row_tokens: int) -> list[list[int]]:
    """Document indices per row, rows in the order they were opened."""
    rows, free = [], []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        row = next((r for r, space in enumerate(free) if space >= lengths[index]), None)
        if row is None:
            rows.append([])
            free.append(row_tokens)
            row = len(rows) - 1
        rows[row].append(index)
        free[row] -= lengths[index]
    return rows


def build_bench_data(spec: ModelSpec, *, row_tokens: int, rows_per_step: int, steps: int, seed: int, median: float,
                     sigma: float, ones: float, dtype: str, device: str) -> BenchData:
    rng = random.Random(seed)
    needed = rows_per_step * steps
    total = needed * row_tokens
    while True:
        lengths = document_lengths(rng, int(total * 1.05), row_tokens, median, sigma, ones)
        opened = first_fit_decreasing(lengths, row_tokens)
        if len(opened) > needed:
            break
        total *= 1.1
    kept = sorted(rng.sample(range(len(opened) - 1), needed))  # never the last row opened: the one left part-empty
    rng.shuffle(kept)
    generator = torch.Generator().manual_seed(seed)
    cases, rows = [], []
    for step in range(steps):
        step_rows = [opened[r] for r in sorted(kept[step * rows_per_step:(step + 1) * rows_per_step])]
        samples = []
        for row in step_rows:
            for index in row:
                ids = torch.randint(spec.vocab_size, (lengths[index],), generator=generator).tolist()
                samples.append(Sample(input_ids=ids, loss_mask=[0] + [1] * (lengths[index] - 1)))
        step_lengths = [[lengths[i] for i in row] for row in step_rows]
        flat = [n for row in step_lengths for n in row]
        rebuilt = [[flat[i] for i in row] for row in pack_rows(flat, row_tokens)]
        if rebuilt != step_lengths:
            raise AssertionError(f"step {step}: the reference packer would not rebuild the planned rows")
        cases.append(Case(name=f"bench-step-{step}", model=spec, samples=samples, layout=packed(row_tokens),
                          partition=Partition.all_in_one(len(samples)), dtype=dtype, device=device))
        rows.append(step_lengths)
    return BenchData(cases=cases, rows=rows, row_tokens=row_tokens, rows_per_step=rows_per_step)
