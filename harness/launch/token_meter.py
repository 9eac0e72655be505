"""What one rank of a distributed arm computed: the token ids it looked up in the vocabulary embedding.

A rank's work starts where its tokens enter the model: every engine turns the token ids it computes
into embeddings, and under context or data parallelism each rank embeds only its share (its shard of
every row, its data-parallel rank's micro-batches). `TokenMeter` is a TorchFunctionMode the worker
holds around `engine.run` of a distributed case: it sees every lookup (`F.embedding`, `torch.embedding`,
`index_select` along the rows, `weight[ids]`) into a vocabulary table and keeps how often each id was
looked up, so the harness can check that the ranks' shares cover the batch once
(harness/run/work_share.py). A vocabulary table is a floating-point matrix of `vocab_size` rows, or one
padded past it as engines pad their embedding (Megatron's `make_vocab_size_divisible_by` times the
tensor-parallel size, vLLM's and nanoGPT's multiple of 64): fewer than `MAX_PADDING` rows more, exactly
`hidden_size` wide, and looked up only with ids below `vocab_size`, which a padding row never holds. The
width keeps out the position tables a model of these families can have (RoPE's cos and sin caches are a
head wide or less, and may be longer than the vocabulary); a matrix of the vocabulary's shape looked up
with token ids is counted whatever it is (an untied lm_head gathered by labels, say: docs/distributed.md).
It does not change what the engine computes: it records the ids and
runs the call as made. It is a TorchFunctionMode, not a TorchDispatchMode: a dispatch mode sees every
aten op (and, at its first op under a device context, imports torch._dynamo: 2.5-5 s in each rank,
which pushed tiny cases past a 5 s timeout), while a function mode sees only the Python-level torch
calls, of which the lookups are a handful. A lookup repeated with the very same ids (a no-grad pass before the training
pass, recomputation under activation checkpointing) is counted once: it is the same work again, not
another rank's.

Lookups inside a compiled graph (inductor's kernels), in C++ or in a kernel of the engine's own are
not Python-level torch calls, so a rank can show no lookups at all; the harness then says the work was not
observable and keeps the collective trace as the only evidence (docs/distributed.md).

The meter lives in the engine's own process, so it records what that process lets it: an engine that
writes its counts, leaves its mode or makes lookups of its share for show is believed. It proves the
work of an engine that does not forge it, not of one that does (docs/isolation.md).
"""

from __future__ import annotations

import hashlib

import torch
from torch.overrides import TorchFunctionMode

F = torch.nn.functional

# The most rows an engine's padding adds to the vocabulary: 128 x 16, Megatron's default multiple at a tensor-parallel size
# of 16; the conventions of 64 and 128 rows add fewer.
MAX_PADDING = 2048


def _argument(args: tuple, kwargs: dict, index: int, name: str):
    return args[index] if len(args) > index else kwargs.get(name)


class TokenMeter(TorchFunctionMode):
    def __init__(self, vocab_size: int, hidden_size: int | None = None) -> None:
        """`hidden_size`: the width a padded vocabulary table must have; None counts only tables of `vocab_size` rows."""
        super().__init__()
        self.vocab_size, self.hidden_size = vocab_size, hidden_size
        self.counts: dict[int, int] = {}
        self.lookups = 0
        self._seen: set[bytes] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        ids = self._looked_up(func, args, kwargs)
        if ids is not None:
            self._record(ids)
        return func(*args, **kwargs)

    def _looked_up(self, func, args: tuple, kwargs: dict) -> torch.Tensor | None:
        """The ids of a lookup into the vocabulary matrix, else None."""
        if func is F.embedding:
            table, ids = _argument(args, kwargs, 1, "weight"), _argument(args, kwargs, 0, "input")
        elif func is torch.embedding:
            table, ids = _argument(args, kwargs, 0, "weight"), _argument(args, kwargs, 1, "indices")
        elif func in (torch.index_select, torch.Tensor.index_select) and _argument(args, kwargs, 1, "dim") == 0:
            table, ids = _argument(args, kwargs, 0, "input"), _argument(args, kwargs, 2, "index")
        elif func is torch.Tensor.__getitem__ and len(args) == 2 and isinstance(args[1], torch.Tensor):
            table, ids = args
        else:
            return None
        if not isinstance(table, torch.Tensor) or not isinstance(ids, torch.Tensor):
            return None
        if table.dim() != 2 or not table.is_floating_point():
            return None
        ids = getattr(ids, "_local_tensor", ids)  # a DTensor's ids: this rank's own, never a collective here
        if ids.is_floating_point() or ids.dtype is torch.bool:
            return None
        return ids if table.shape[0] == self.vocab_size or self._padded_vocabulary(table, ids) else None

    def _padded_vocabulary(self, table: torch.Tensor, ids: torch.Tensor) -> bool:
        rows, width = table.shape
        return (self.hidden_size is not None and width == self.hidden_size and self.vocab_size < rows < self.vocab_size + MAX_PADDING
                and ids.numel() > 0 and int(ids.min()) >= 0 and int(ids.max()) < self.vocab_size)

    def _record(self, ids: torch.Tensor) -> None:
        flat = ids.detach().reshape(-1).to("cpu", torch.int64)
        key = hashlib.blake2b(flat.numpy().tobytes(), digest_size=16).digest() + str(tuple(ids.shape)).encode()
        self.lookups += 1
        if key in self._seen:
            return
        self._seen.add(key)
        values, counts = flat.unique(return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist()):
            self.counts[value] = self.counts.get(value, 0) + count

    def to_json(self) -> dict:
        return {"lookups": self.lookups, "ids": {str(k): v for k, v in sorted(self.counts.items())}}
