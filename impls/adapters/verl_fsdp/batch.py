"""A Case's micro-batches as the TensorDict verl's engine takes, and the map back to samples.

verl's `forward_backward_batch` gets one mini-batch (the whole optimizer step of this rank) as
jagged nested tensors `input_ids`, `position_ids`, `loss_mask` (verl's convention is the
harness's: `loss_mask[t] = 1` when token t is a target), plus non-tensor settings. With a static
micro-batch size it cuts the batch in order into chunks of `micro_batch_size_per_gpu` rows, one
forward each (`prepare_micro_batches`). The harness's partition has micro-batches of different
sizes, so each is filled up to the largest with *inert* rows: one token, loss mask 0, which verl
counts nowhere and which, with documents kept apart, change nothing else. The slot list records
which sample (or None for an inert row) sits in each row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.contract import Case, LayoutKind

INERT_TOKEN = 0  # the tokenizer's pad id


@dataclass(frozen=True, slots=True)
class VerlBatch:
    slots: tuple[tuple[int | None, ...], ...]  # per micro-batch, the sample index of each row (None: inert)
    micro_batch_size: int
    tensors: dict[str, torch.Tensor]
    settings: dict

    @property
    def rows(self) -> list[int | None]:
        return [s for mb in self.slots for s in mb]


def micro_batch_size(case: Case) -> int:
    """The rows per micro-batch: the largest micro-batch of any rank (verl's micro-batch size is one number)."""
    return max(len(mb) for rank in case.partition.per_rank for mb in rank)


def slots_for(case: Case, dp_rank: int) -> tuple[tuple[int | None, ...], ...]:
    size = micro_batch_size(case)
    return tuple(tuple(mb) + (None,) * (size - len(mb)) for mb in case.partition.per_rank[dp_rank])


def settings_for(case: Case, size: int) -> dict:
    return {
        # packed: verl's remove-padding path, one varlen row per micro-batch; unpacked: its padded path
        "use_remove_padding": case.layout.kind is LayoutKind.PACKED,
        "use_dynamic_bsz": False,
        "micro_batch_size_per_gpu": size,
        "pad_mode": "no_padding",
        "pad_token_id": INERT_TOKEN,
        "temperature": 1.0,
        "global_batch_size": len(case.samples),
        "return_model_output": True,
    }


def build_batch(case: Case, dp_rank: int, token_mask=lambda sample: sample.loss_mask) -> VerlBatch:
    size = micro_batch_size(case)
    slots = slots_for(case, dp_rank)
    ids, masks = [], []
    for slot in (s for mb in slots for s in mb):
        if slot is None:
            ids.append([INERT_TOKEN])
            masks.append([0])
        else:
            ids.append(list(case.samples[slot].input_ids))
            masks.append(list(token_mask(case.samples[slot])))

    def jagged(rows: list[list[int]]) -> torch.Tensor:
        return torch.nested.as_nested_tensor([torch.tensor(r, dtype=torch.long) for r in rows], layout=torch.jagged)

    tensors = {
        "input_ids": jagged(ids),
        "position_ids": jagged([list(range(len(r))) for r in ids]),
        "loss_mask": jagged(masks),
    }
    return VerlBatch(slots=slots, micro_batch_size=size, tensors=tensors, settings=settings_for(case, size))
