"""The Case's RL samples as the inputs GRPOTrainer's loss takes after generation and scoring.

`GRPOTrainer._compute_loss` reads one micro-batch as `prompt_ids` (padded on the left),
`completion_ids` (padded on the right) and their masks, whose concatenation is the attention mask,
plus `advantages`, `old_per_token_logps`, `ref_per_token_logps` (KL) and `num_items_in_batch`.
A sample's prompt is its tokens before the first target (token 0 never is one), its completion the
rest; `completion_mask` marks every real completion token, because it is also the attention mask,
and a completion token off the loss mask goes in `tool_mask` (TRL's mask for tokens the policy
did not generate: the loss mask is `completion_mask * tool_mask`). A fully masked sample is all
prompt. Entry j of a completion row is aligned with `per_token_logps[:, j]`, the log-prob of
completion token j: the Case's old / ref log-probs and per-token advantages at the same tokens.

`num_items_in_batch` is the expression TRL evaluates at the end of generation over a rank's whole
generation batch (every micro-batch of the optimizer step): `accelerator.gather(loss_mask.sum()).sum()`.

Shapes: B rows of the micro-batch, P prompt width, C completion width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.contract import Case, Sample
from packcheck.impls.adapters.hf_common.tokenizer import PAD_ID


@dataclass(frozen=True, slots=True)
class Split:
    prompt: tuple[int, ...]
    completion: tuple[int, ...]
    start: int  # index in input_ids of completion token 0


def split(sample: Sample) -> Split:
    first = next((t for t, m in enumerate(sample.loss_mask) if m), len(sample.input_ids))
    return Split(prompt=sample.input_ids[:first], completion=sample.input_ids[first:], start=first)


def loss_tokens(case: Case, sample_ids) -> int:
    return sum(case.samples[i].num_targets for i in sample_ids)


def _rows(values: list[list[float]], width: int, fill: float, left: bool, dtype) -> torch.Tensor:
    padded = [[fill] * (width - len(v)) + v if left else v + [fill] * (width - len(v)) for v in values]
    return torch.tensor(padded, dtype=dtype)


def micro_batch_inputs(case: Case, sample_ids, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The `_compute_loss` inputs of one micro-batch (num_items_in_batch is added by the engine)."""
    samples = [case.samples[i] for i in sample_ids]
    splits = [split(s) for s in samples]
    P = max(len(s.prompt) for s in splits)
    C = max(max(len(s.completion) for s in splits), 1)
    tail = lambda s, sp, values: [float(v) for v in values[sp.start:]]  # noqa: E731
    inputs = {
        "prompt_ids": _rows([list(sp.prompt) for sp in splits], P, PAD_ID, True, torch.long),
        "prompt_mask": _rows([[1] * len(sp.prompt) for sp in splits], P, 0, True, torch.long),
        "completion_ids": _rows([list(sp.completion) for sp in splits], C, PAD_ID, False, torch.long),
        "completion_mask": _rows([[1] * len(sp.completion) for sp in splits], C, 0, False, torch.long),
        "tool_mask": _rows([list(s.loss_mask[sp.start:]) for s, sp in zip(samples, splits)], C, 1, False, torch.long),
        "advantages": _rows([tail(s, sp, s.token_advantages) for s, sp in zip(samples, splits)], C, 0.0, False, dtype),
        "old_per_token_logps": _rows([tail(s, sp, s.old_logprobs) for s, sp in zip(samples, splits)], C, 0.0, False, dtype),
    }
    if case.loss.kl_coef:
        inputs["ref_per_token_logps"] = _rows([tail(s, sp, s.ref_logprobs) for s, sp in zip(samples, splits)], C, 0.0, False, dtype)
    return inputs
