"""The documents of a real packed batch as the guard sees them, and the batches it builds from them.

A batch is what the engine's model is called with: `input_ids` [B, T], `labels` [B, T] (unshifted, -100 where no
loss: transformers' convention, the model shifts), and where packed, `position_ids` [B, T] restarting at 0 at each
document (DataCollatorWithFlattening, TRL's padding_free) or flash-attention's `cu_seq_lens_q`. `attention_mask`
[B, T] marks padding. A row without position resets is one document.

Each document's targets are its own labels after the first token (`labels[start + 1:end]`): position t predicts
label t + 1, and a document's last position predicts nothing of its own. The packed row's targets are every label
after each row's first, so a label left on the first token of a following document (a collator that does not mask
document starts) is a target the packed loss counts and no document has: the token count tells.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

IGNORE = -100
# keys the guard rebuilds for a batch of some of the documents (shrinking); a batch with others is not shrunk
REBUILT = frozenset({"input_ids", "labels", "position_ids", "attention_mask", "num_items_in_batch", "cu_seq_lens_q",
                     "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx", "use_cache", "return_dict",
                     "fused_lm_head"})


class BatchProblem(ValueError):
    """A batch the guard cannot read: the message names the key and what it takes."""


@dataclass(frozen=True, slots=True)
class Document:
    row: int
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


def documents_of(batch: Mapping[str, object]) -> tuple[Document, ...]:
    """Every document of the batch, row by row, padding left out."""
    input_ids = _tensor(batch, "input_ids")
    if input_ids.dim() != 2:
        raise BatchProblem(f"input_ids has shape {tuple(input_ids.shape)}: the guard takes [rows, tokens]")
    if not isinstance(batch.get("labels"), torch.Tensor) or batch["labels"].shape != input_ids.shape:
        raise BatchProblem("labels: the guard needs the batch's labels, the shape of input_ids (-100 where no loss)")
    rows, tokens = input_ids.shape
    mask = batch.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() != 2:
        raise BatchProblem(f"attention_mask has shape {tuple(mask.shape)}: the guard reads a [rows, tokens] padding mask; "
                           "pass documents through position_ids instead of a 4-D mask")
    cu = batch.get("cu_seq_lens_q")
    if isinstance(cu, torch.Tensor) and "position_ids" not in batch:
        if rows != 1:
            raise BatchProblem("cu_seq_lens_q with more than one row: the guard takes it for one packed row")
        ends = cu.flatten().tolist()
        return tuple(Document(0, a, b) for a, b in zip(ends[:-1], ends[1:]) if b > a)
    positions = batch.get("position_ids")
    found = []
    for row in range(rows):
        valid = (mask[row] != 0).nonzero().flatten() if isinstance(mask, torch.Tensor) else torch.arange(tokens)
        if not len(valid):
            continue
        lo, hi = int(valid[0]), int(valid[-1]) + 1
        starts = [lo]
        if isinstance(positions, torch.Tensor):
            p = positions.reshape(-1, tokens)[min(row, positions.shape[0] - 1), lo:hi]
            starts += (lo + 1 + (p[1:] <= p[:-1]).nonzero().flatten()).tolist()
        found += [Document(row, a, b) for a, b in zip(starts, [*starts[1:], hi])]
    return tuple(found)


def targets(labels: torch.Tensor, document: Document) -> torch.Tensor:
    """The document's targets: its labels after its first token."""
    return labels[document.row, document.start + 1:document.end]


def target_count(labels: torch.Tensor, documents: tuple[Document, ...]) -> int:
    return sum(int((targets(labels, d) != IGNORE).sum()) for d in documents)


def packed_target_count(batch: Mapping[str, object]) -> int:
    """The targets a packed loss over the rows counts: every label after each row's first token, padding left out."""
    labels = batch["labels"]
    mask = batch.get("attention_mask")
    shifted = labels[:, 1:] != IGNORE
    if isinstance(mask, torch.Tensor):
        shifted &= mask[:, 1:] != 0
    return int(shifted.sum())


def one_document(batch: Mapping[str, object], document: Document) -> dict[str, torch.Tensor]:
    """The document alone, unpadded, its positions from 0: what the per-document oracle runs."""
    ids = batch["input_ids"][document.row, document.start:document.end][None]
    return {"input_ids": ids, "position_ids": torch.arange(document.length, device=ids.device)[None]}


def packed_of(batch: Mapping[str, object], documents: tuple[Document, ...]) -> dict[str, object]:
    """A batch of some of the batch's documents, laid end to end in one row as the batch's own keys say it: the guard
    shrinks a failing batch through these. Keys outside REBUILT are refused (BatchProblem): they cannot be cut."""
    if other := sorted(set(batch) - REBUILT):
        raise BatchProblem(f"the batch has {', '.join(other)}, which the guard cannot cut to fewer documents")
    pieces = [(batch["input_ids"][d.row, d.start:d.end], batch["labels"][d.row, d.start:d.end]) for d in documents]
    ids, labels = torch.cat([p[0] for p in pieces])[None], torch.cat([p[1] for p in pieces])[None]
    lengths = [d.length for d in documents]
    out: dict[str, object] = {"input_ids": ids, "labels": labels}
    if "position_ids" in batch or "cu_seq_lens_q" in batch:
        out["position_ids"] = torch.cat([torch.arange(n, device=ids.device) for n in lengths])[None]
    if "attention_mask" in batch:
        out["attention_mask"] = torch.ones_like(ids)
    if "num_items_in_batch" in batch:
        count = target_count(labels, tuple(_relaid(lengths)))
        given = batch["num_items_in_batch"]
        out["num_items_in_batch"] = torch.tensor(count, device=given.device) if isinstance(given, torch.Tensor) else count
    for key in ("cu_seq_lens_q", "cu_seq_lens_k"):
        if key in batch:
            out[key] = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=ids.device)
    for key in ("max_length_q", "max_length_k"):
        if key in batch:
            out[key] = max(lengths)
    if "seq_idx" in batch:  # TRL's padding_free: each token's document index
        out["seq_idx"] = torch.cat([torch.full((n,), i, dtype=batch["seq_idx"].dtype) for i, n in enumerate(lengths)])[None].to(ids.device)
    for key in ("use_cache", "return_dict", "fused_lm_head"):
        if key in batch:
            out[key] = batch[key]
    return out


def _relaid(lengths: list[int]) -> list[Document]:
    ends = torch.tensor(lengths).cumsum(0).tolist()
    return [Document(0, e - n, e) for n, e in zip(lengths, ends)]


def relaid(documents: tuple[Document, ...]) -> tuple[Document, ...]:
    """Where `packed_of` puts the documents: end to end in row 0."""
    return tuple(_relaid([d.length for d in documents]))


def _tensor(batch: Mapping[str, object], key: str) -> torch.Tensor:
    value = batch.get(key)
    if not isinstance(value, torch.Tensor):
        raise BatchProblem(f"{key}: the guard needs the batch's {key} as a tensor (got {type(value).__name__})")
    return value
