"""The per-token RL inputs of a Case (advantages, old and reference log-probs) laid out like the rows.

Every position maps to the (sample, token) it predicts through `label_sample_BT` /
`label_token_BT`, so the inputs follow each document wherever the layout (or a context-parallel
shard) put it; positions predicting nothing get zeros (their weight is zero).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.predictions import Predictions


@dataclass(frozen=True, slots=True)
class PolicyInputs:
    advantages_BT: torch.Tensor
    old_logprobs_BT: torch.Tensor
    ref_logprobs_BT: torch.Tensor | None

    def to(self, like: torch.Tensor) -> PolicyInputs:
        move = lambda t: None if t is None else t.to(like.device, like.dtype)  # noqa: E731
        return PolicyInputs(move(self.advantages_BT), move(self.old_logprobs_BT), move(self.ref_logprobs_BT))


def scatter_per_token(predictions: Predictions, values_of: Callable[[int], Sequence[float]]) -> torch.Tensor:
    """A [B, T] float64 tensor holding values_of(sample)[token] at every position predicting that token."""
    samples_BT = predictions.label_sample_BT.cpu()
    out_BT = torch.zeros(samples_BT.shape, dtype=torch.float64)
    for sample in samples_BT.unique().tolist():
        if sample >= 0:
            where = samples_BT == sample
            out_BT[where] = torch.tensor(values_of(sample), dtype=torch.float64)[predictions.label_token_BT.cpu()[where]]
    return out_BT


def policy_inputs(case: Case, predictions: Predictions) -> PolicyInputs:
    samples = case.samples
    ref = None
    if case.loss.kl_coef:
        ref = scatter_per_token(predictions, lambda i: samples[i].ref_logprobs)
    return PolicyInputs(
        advantages_BT=scatter_per_token(predictions, lambda i: samples[i].token_advantages),
        old_logprobs_BT=scatter_per_token(predictions, lambda i: samples[i].old_logprobs),
        ref_logprobs_BT=ref,
    )
