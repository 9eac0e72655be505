"""Where each sample sits in the batch the trainer's collator built, read from that batch itself.

A padded batch (`attention_mask` present) holds one sample per row, on the valid span of the mask;
a flattened batch (no mask: DataCollatorWithFlattening, TRL padding_free) holds the micro-batch in
one row, each sample starting where `position_ids` resets to 0. The spans are checked against the
Case's samples token by token, so a collator that dropped, reordered, truncated or padded into a
sample fails loudly here instead of producing plausible numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.contract import Sample


class TranslationError(AssertionError):
    """The engine's batch does not hold exactly the Case's samples."""


@dataclass(frozen=True, slots=True)
class Span:
    sample: int  # index into Case.samples
    row: int
    start: int  # row position of the sample's token 0


def spans(inputs: dict[str, torch.Tensor], sample_ids: tuple[int, ...], samples: tuple[Sample, ...]) -> list[Span]:
    input_ids_RT = inputs["input_ids"]
    if "attention_mask" in inputs:
        found = []
        for row, mask_T in enumerate(inputs["attention_mask"]):
            valid = mask_T.nonzero().flatten().tolist()
            if valid != list(range(valid[0], valid[-1] + 1)) if valid else True:
                raise TranslationError(f"row {row}: attention mask {mask_T.tolist()} is not one contiguous span")
            found.append((row, valid[0], len(valid)))
    else:
        if input_ids_RT.shape[0] != 1:
            raise TranslationError(f"a flattened batch has one row, this one has {input_ids_RT.shape[0]}")
        starts = (inputs["position_ids"][0] == 0).nonzero().flatten().tolist()
        ends = starts[1:] + [input_ids_RT.shape[1]]
        found = [(0, s, e - s) for s, e in zip(starts, ends)]
    if len(found) != len(sample_ids):
        raise TranslationError(f"the batch holds {len(found)} sequences, the micro-batch {len(sample_ids)} samples {list(sample_ids)}")
    result = []
    for (row, start, length), i in zip(found, sample_ids):
        tokens = input_ids_RT[row, start:start + length].tolist()
        if tokens != list(samples[i].input_ids):
            raise TranslationError(f"sample {i} is not what the batch holds at row {row} [{start}:{start + length}]: "
                                   f"{list(samples[i].input_ids)} vs {tokens}")
        result.append(Span(sample=i, row=row, start=start))
    return result


def sample_values(values_RT: torch.Tensor, span: Span, length: int) -> torch.Tensor:
    """Entry t = the value at the row position that predicts token t (t-1 in the row); entry 0 is the
    value at the position before the sample (another document, padding), or 0 if it starts the row."""
    out = torch.zeros(length, dtype=values_RT.dtype)
    first = max(span.start - 1, 0)
    row_values = values_RT[span.row, first:span.start + length - 1]
    out[length - len(row_values):] = row_values
    return out
