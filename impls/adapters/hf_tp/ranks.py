"""The data-parallel ranks' steps as the one StepResult rank 0 returns, reduced over the data-parallel group only.

Both ranks of a TP group ran the same rows, so a reduction over the whole world would count every sample tp times;
each reduction here runs on the mesh's "dp" group (ranks with the same tp coordinate), with `dist.all_reduce` in
float64, on every rank in the same order. Each sample ran on exactly one data-parallel rank: the per-sample log-probs
are summed (zeros elsewhere); every rank's loss is its share of the global token-mean (divided by the global count),
so the step's loss and gradients are the sums over the data-parallel group.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.distributed as dist

from packcheck.harness.contract import Case, StepResult


def reduced(value: float | torch.Tensor, group) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.float64).clone()
    dist.all_reduce(t, group=group)
    return t


def combine_dp(case: Case, local: StepResult, group) -> StepResult | None:
    """Global rank 0: the step's StepResult; the other ranks: None (after taking part in every reduction)."""
    lengths = [len(s.input_ids) for s in case.samples]
    dtype = next(t.dtype for t in local.logprobs if t is not None)
    flat = torch.cat([torch.zeros(n, dtype=torch.float64) if t is None else t.double() for t, n in zip(local.logprobs, lengths)])
    ran = reduced(torch.tensor([float(t is not None) for t in local.logprobs]), group)
    if not torch.equal(ran, torch.ones_like(ran)):
        raise RuntimeError(f"samples run by other than exactly one data-parallel rank: {ran.tolist()}")
    logprobs = [t.to(dtype) for t in reduced(flat, group).split(lengths)]
    loss = reduced(local.loss, group).item()
    grads = {name: reduced(g, group).to(g.dtype) for name, g in local.grads.items()}
    if dist.get_rank() != 0:
        return None
    return replace(local, logprobs=logprobs, loss=loss, grads=grads)
