"""The Case's data as prime-rl's trainer receives it: one `TrainingSample` per sample (the
orchestrator's wire format), `prepare_sample` + `packed_samples_into_micro_bs` (first-fit-decreasing
bins of `seq_len` tokens) + `pad_micro_batch` (to a multiple of cp, as `rl.py` sets the orchestrator's
`pad_to_multiple_of`), all prime-rl's own code, run per micro-batch of the Case's partition.

A packed layout packs at the layout's seq_len; an unpacked one gives every sample a bin of its own
(prime-rl has no padded layout: a bin holding one sample is what its packer makes of samples that do
not fit together). Each sample travels as its own `env_name` (its index), a per-token stream prime-rl
carries through packing, which is how the adapter finds every token again afterwards.

The tensors are what `rl/data.py::DataLoader._micro_batch_to_tensor` builds, but in the Case's dtype
(`stream_dtype`): prime-rl builds float32 streams (old and reference log-probs, advantages), which
would make a float64 comparison measure that cast (the fused-lm-head variant keeps it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from packcheck.harness.contract import Case, LayoutKind

SFT_WEIGHT = 1.0  # prime-rl's ce component: weight 1 on every trained token (its masked NLL)


@dataclass(frozen=True, slots=True)
class Row:
    """One packed micro-batch of prime-rl as tensors [1, T], and which sample each token is."""

    tensors: dict
    sequence_lengths: list[int]
    sample_of_token: list[int | None]  # harness sample index per position (None: padding)


def training_sample(case: Case, index: int):
    from prime_rl.transports.rollouts.types import TrainingSample

    sample = case.samples[index]
    n = len(sample.input_ids)
    policy = case.loss.is_policy
    return TrainingSample(
        token_ids=list(sample.input_ids),
        mask=[bool(m) for m in sample.loss_mask],
        logprobs=list(sample.old_logprobs) if policy else [0.0] * n,
        temperatures=[1.0] * n,
        env_name=str(index),
        ref_logprobs=list(sample.ref_logprobs) if policy and case.loss.kl_coef else None,
        advantages=list(sample.token_advantages) if policy else None,
        # a pure cross-entropy sample: no rl member tokens, the ce component on the loss mask
        rl_weights=None if policy else [0.0] * n,
        ce_weights=None if policy else [SFT_WEIGHT * m for m in sample.loss_mask],
    )


def bins_for(case: Case, micro_batch: tuple[int, ...], cp: int):
    """prime-rl's packed micro-batches (MicroBatch structs) for one micro-batch of the Case."""
    from prime_rl.trainer.batch import build_bin_cost, pad_micro_batch, packed_samples_into_micro_bs, prepare_sample

    bin_cost = build_bin_cost(None)
    if case.layout.kind is LayoutKind.PACKED:
        groups, seq_len = [list(micro_batch)], case.layout.seq_len
    else:
        groups, seq_len = [[i] for i in micro_batch], max(len(case.samples[i].input_ids) for i in micro_batch)
    bins = []
    for group in groups:
        prepared = [prepare_sample(training_sample(case, i), seq_len) for i in group]
        bins += packed_samples_into_micro_bs(prepared, seq_len, 1, bin_cost)
    return [pad_micro_batch(b, cp) for b in bins]


def row_of(micro_batch, stream_dtype: torch.dtype) -> Row:
    def stream(values):
        return None if values is None else torch.tensor(values, dtype=stream_dtype).unsqueeze(0)

    tensors = {
        "input_ids": torch.tensor(micro_batch.input_ids, dtype=torch.long).unsqueeze(0),
        "position_ids": torch.tensor(micro_batch.position_ids, dtype=torch.long).unsqueeze(0),
        "advantages": stream(micro_batch.advantages),
        "inference_logprobs": stream(micro_batch.inference_logprobs),
        "ref_logprobs": stream(micro_batch.ref_logprobs),
        "loss_mask": torch.tensor(micro_batch.loss_mask, dtype=torch.bool).unsqueeze(0),
        "temperatures": stream(micro_batch.temperatures),
        "seq_lens": torch.tensor(micro_batch.seq_lens, dtype=torch.long),
        "rl_weights": stream(micro_batch.rl_weights),
        "ce_weights": stream(micro_batch.ce_weights),
        "ref_kl_weights": stream(micro_batch.ref_kl_weights),
    }
    owners = [int(name) if name else None for name in micro_batch.env_names]
    return Row(tensors, list(micro_batch.sequence_lengths), owners)


def rows_for(case: Case, micro_batch: tuple[int, ...], cp: int, stream_dtype: torch.dtype) -> list[Row]:
    return [row_of(b, stream_dtype) for b in bins_for(case, micro_batch, cp)]
