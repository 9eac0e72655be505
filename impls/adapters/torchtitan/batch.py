"""The Case's micro-batches as torchtitan's data iterator yields them: ({"input", "positions"}, labels).

Rows follow the Case's layout (harness/contract/rows.py). torchtitan finds documents where
`positions` resets to 0 (its flex document mask), so every document's positions count from 0 and
each run of padding counts from 0 too: padding is its own document and never a key for real
tokens. Labels are the next token of the same document where the Case's loss mask makes it a
target, IGNORE_INDEX (-100) elsewhere: at a document's last token, on padding and on masked
targets. (torchtitan's own text loader shifts over the whole packed buffer, where a document's EOS
predicts the next BOS; a Case has no EOS/BOS, so nothing crosses a document boundary here.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.contract import Case
from packcheck.harness.contract.rows import layout_rows

IGNORE_INDEX = -100  # torchtitan.components.loss.IGNORE_INDEX
PAD_TOKEN = 0


@dataclass(frozen=True, slots=True)
class Span:
    sample: int
    step: int  # micro-batch
    row: int
    start: int  # row position of the sample's token 0


@dataclass(frozen=True, slots=True)
class MicroBatch:
    inputs_RT: torch.Tensor
    positions_RT: torch.Tensor
    labels_RT: torch.Tensor


def micro_batches(case: Case, rank: int = 0) -> tuple[list[MicroBatch], list[Span]]:
    """Every micro-batch of `rank`, in order, and where each of its samples sits."""
    by_step: dict[int, list] = {}
    for row in layout_rows(case):
        if row.rank == rank:
            by_step.setdefault(row.step, []).append(row)
    batches, spans = [], []
    for step in sorted(by_step):
        rows = by_step[step]
        widths = {row.width for row in rows}
        if len(widths) != 1:
            raise ValueError(f"micro-batch {step} has rows of widths {sorted(widths)}: torchtitan takes one [rows, seq_len] tensor")
        (width,) = widths
        inputs_RT = torch.full((len(rows), width), PAD_TOKEN, dtype=torch.long)
        positions_RT = torch.zeros((len(rows), width), dtype=torch.long)
        labels_RT = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
        for r, row in enumerate(rows):
            covered = torch.zeros(width, dtype=torch.bool)
            for i, start in zip(row.samples, row.starts(case)):
                sample = case.samples[i]
                n = len(sample.input_ids)
                inputs_RT[r, start:start + n] = torch.tensor(sample.input_ids)
                positions_RT[r, start:start + n] = torch.arange(n)
                covered[start:start + n] = True
                targets = torch.tensor(sample.input_ids[1:], dtype=torch.long)
                keep = torch.tensor(sample.loss_mask[1:], dtype=torch.bool)
                labels_RT[r, start:start + n - 1] = torch.where(keep, targets, IGNORE_INDEX)
                spans.append(Span(sample=i, step=step, row=r, start=start))
            positions_RT[r] = padding_positions(positions_RT[r], covered)
        batches.append(MicroBatch(inputs_RT, positions_RT, labels_RT))
    return batches, spans


def padding_positions(positions_T: torch.Tensor, covered_T: torch.Tensor) -> torch.Tensor:
    """Each run of padding numbered from 0, so torchtitan reads it as a document of its own."""
    out = positions_T.clone()
    run = 0
    for t in range(len(out)):
        if covered_T[t]:
            run = 0
        else:
            out[t] = run
            run += 1
    return out


def sample_logprobs(case: Case, spans: list[Span], logprobs_by_step: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per sample: entry t = log p(x_t | x_<t) read at the row position before t; entry 0 is 0."""
    out: list[torch.Tensor | None] = [None] * len(case.samples)
    for span in spans:
        ids = torch.tensor(case.samples[span.sample].input_ids)
        row_RTV = logprobs_by_step[span.step][span.row]
        values = torch.zeros(len(ids), dtype=row_RTV.dtype)
        if len(ids) > 1:
            positions = torch.arange(span.start, span.start + len(ids) - 1)
            values[1:] = row_RTV[positions, ids[1:]]
        out[span.sample] = values
    return out
