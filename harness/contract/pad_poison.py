"""A Case's request that the engine poison its own pad positions (Case.pad_poison; docs/contract.md, "Poisoned pads").

Pads are positions of the engine's own layout (the tail of a packed row, the padded side of an unpacked row, the
width a context-parallel engine adds so its shards are equal), so only the engine can write into them. Asked to, it
writes, at every position of every forward that holds no token of any sample:
- its logits row: NaN and +Inf (NaN at even vocabulary entries, +Inf at odd ones);
- its embeddings' output: a large finite value;
- (MoE) its router logits: a large finite value;
and the canary's logits row (the row that predicts `samples[sample].input_ids[token]`) becomes CANARY_LOGIT at
vocabulary entry 0 and zeros elsewhere, so the engine must report exactly `canary_logprob(vocab_size, label)` as that
token's log-prob: about -30 nats (0 if the label is token 0), where a model's own prediction never is (all zeros
would give -log(vocab), which a tiny random model's near-uniform prediction comes within tenths of a nat of, 2.5e-3
on llama). harness/engines/pad_poison.py writes them.

A correct engine's loss, count, log-probs (the canary's aside), per-token weights, gradients and router reports are
then exactly what they are without the request: no real position reads a pad, nothing in the loss or in a statistic
counts one. Only the logits carry non-finite values: an overwrite `where(pad, poison, x)` has an exact backward (0
to x at the pads), and right before the log-softmax nothing but the loss reads that row. Upstream of it a NaN reaches
every weight gradient of any correct engine (0 x NaN = NaN in dW = X^T dY and in the attention's P V), so there the
poison is finite. The canary lies outside the loss mask, so the request changes nothing the loss or a gradient sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from packcheck.harness.contract.errors import ContractError
from packcheck.harness.contract.samples import Sample


CANARY_LOGIT = 30.0  # the canary row's entry 0 (the others 0): exact in bfloat16, ~25 nats from a tiny model's predictions


def canary_logprob(vocab_size: int, label: int) -> float:
    """log_softmax of the canary row at `label`: CANARY_LOGIT at entry 0, 0 elsewhere."""
    log_z = CANARY_LOGIT + math.log1p((vocab_size - 1) * math.exp(-CANARY_LOGIT))
    return (CANARY_LOGIT if label == 0 else 0.0) - log_z


@dataclass(frozen=True, kw_only=True, slots=True)
class PadPoison:
    canary: tuple[int, int]  # (sample, token): a position outside the loss mask whose logits row the engine overwrites

    def __post_init__(self) -> None:
        object.__setattr__(self, "canary", tuple(int(v) for v in self.canary))

    def check(self, samples: Sequence[Sample], where: str) -> None:
        """Raise ContractError naming the field and the fix if the canary is not a real, unsupervised position."""
        if len(self.canary) != 2:
            raise ContractError(f"{where}: pad_poison.canary is {self.canary!r}: give (sample, token)")
        sample, token = self.canary
        if not 0 <= sample < len(samples):
            raise ContractError(f"{where}: pad_poison.canary names sample {sample}, but the case has samples 0..{len(samples) - 1}")
        length = len(samples[sample].input_ids)
        if not 1 <= token < length:
            raise ContractError(f"{where}: pad_poison.canary names token {token} of sample {sample} (length {length}): use a token "
                                "1..length-1, one that is predicted from a token of its own sample")
        if samples[sample].loss_mask[token]:
            raise ContractError(f"{where}: pad_poison.canary ({sample}, {token}) is a loss target: choose a token whose loss_mask is 0, "
                                "so that overwriting its logits changes nothing the loss or a gradient sees")

    def describe(self) -> str:
        return f"pad_poison(canary=sample {self.canary[0]} token {self.canary[1]})"

    def to_json(self) -> dict:
        return {"canary": list(self.canary)}

    @classmethod
    def from_json(cls, data: dict) -> PadPoison:
        return cls(canary=tuple(data["canary"]))
