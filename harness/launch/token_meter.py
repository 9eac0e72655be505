"""What one rank of a distributed arm computed: the token ids it looked up in the vocabulary embedding.

A rank's work starts where its tokens enter the model: every engine turns the token ids it computes
into embeddings, and under context or data parallelism each rank embeds only its share (its shard of
every row, its data-parallel rank's micro-batches). `TokenMeter` is a TorchDispatchMode the worker
holds around `engine.run` of a distributed case: it sees every lookup into a matrix of
`vocab_size` rows (`aten.embedding`, `index_select` along the rows, `weight[ids]`) and keeps how
often each id was looked up, so the harness can check that the ranks' shares cover the batch once
(harness/run/work_share.py). It does not change what the engine computes: it records the ids and
runs the op as called. A lookup repeated with the very same ids (a no-grad pass before the training
pass, recomputation under activation checkpointing) is counted once: it is the same work again, not
another rank's.

Lookups inside a compiled graph (inductor's kernels) or a kernel of the engine's own do not pass
through the dispatcher, so a rank can show no lookups at all; the harness then says the work was not
observable and keeps the collective trace as the only evidence (docs/distributed.md).
"""

from __future__ import annotations

import hashlib

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten


class TokenMeter(TorchDispatchMode):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.counts: dict[int, int] = {}
        self.lookups = 0
        self._seen: set[bytes] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        ids = self._looked_up(func, args)
        if ids is not None:
            self._record(ids)
        return out

    def _looked_up(self, func, args) -> torch.Tensor | None:
        """The ids of a lookup into the vocabulary matrix, else None."""
        if func is aten.embedding.default:
            table, ids = args[0], args[1]
        elif func is aten.index_select.default and args[1] == 0:
            table, ids = args[0], args[2]
        elif func is aten.index.Tensor and len(args[1]) == 1 and args[1][0] is not None:
            table, ids = args[0], args[1][0]
        else:
            return None
        if table.dim() != 2 or table.shape[0] != self.vocab_size or not table.is_floating_point():
            return None
        ids = getattr(ids, "_local_tensor", ids)  # a DTensor's ids: this rank's own, never a collective here
        return ids if not ids.is_floating_point() and ids.dtype is not torch.bool else None

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
