"""The data-parallel ranks' captured steps as the one StepResult rank 0 returns.

Each rank's trainer ran its own micro-batches (partition.py) and accelerate's DDP averaged the
gradients over the ranks in the synchronising backward, so every rank holds the same gradients,
gradient norm and parameters after the step: rank 0's are the step's. What is per rank:

- the per-sample log-probs: each sample was run on exactly one rank; the ranks' values are summed
  (zeros elsewhere);
- the loss weights: a rank's backward differentiates its own loss L_r and DDP takes the mean over
  the dp ranks, so the step's objective is (1/dp) sum_r L_r and a token's weight in it is its rank's
  weight / dp;
- the loss: the Trainer's `training_loss` is the rank's own; the step's is the mean over the ranks,
  what the Trainer itself logs (`_nested_gather(tr_loss).mean()`); a MoE aux term likewise, and the
  router counts add up.

The token count is the trainer's own (already global: the Trainer and TRL gather it over the ranks).
Every reduction is a gloo all_reduce in float64 on every rank, in the same order, before `run` returns.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.distributed as dist

from packcheck.harness.contract import Case, StepResult


def _summed(values: float | torch.Tensor, op=dist.ReduceOp.SUM) -> torch.Tensor:
    t = torch.as_tensor(values, dtype=torch.float64).clone()
    dist.all_reduce(t, op=op)
    return t


def _per_sample_sum(case: Case, local: list[torch.Tensor | None], scale: float) -> list[torch.Tensor]:
    """Every sample's values from the rank that ran it (None on the others), x scale."""
    lengths = [len(s.input_ids) for s in case.samples]
    dtype = next(t.dtype for t in local if t is not None)
    flat = torch.cat([torch.zeros(n, dtype=torch.float64) if t is None else t.double() for t, n in zip(local, lengths)])
    ran = torch.tensor([t is not None for t in local], dtype=torch.float64)
    flat, ran = _summed(flat) * scale, _summed(ran)
    if not torch.equal(ran, torch.ones_like(ran)):
        raise RuntimeError(f"samples run by other than exactly one rank: {ran.tolist()} (the ranks' batch samplers overlap)")
    return [t.to(dtype) for t in flat.split(lengths)]


def combine_ranks(case: Case, local: StepResult) -> StepResult | None:
    """Rank 0: the step's StepResult from every rank's `local` one; the other ranks: None."""
    dp = case.parallel.dp
    logprobs = _per_sample_sum(case, local.logprobs, 1.0)
    weights = None if local.dloss_dlogprobs is None else _per_sample_sum(case, local.dloss_dlogprobs, 1.0 / dp)
    loss = _summed(local.loss).item() / dp
    aux = None if local.aux_loss is None else _summed(local.aux_loss).item() / dp
    routed = None if local.router_tokens_per_expert is None else _summed(local.router_tokens_per_expert).to(torch.int64)
    worst = _summed(max(local.notes.values(), default=0.0), dist.ReduceOp.MAX).item()
    if dist.get_rank() != 0:
        return None
    return replace(local, logprobs=logprobs, dloss_dlogprobs=weights, loss=loss, aux_loss=aux, router_tokens_per_expert=routed,
                   notes={"engine_output_vs_captured_logprobs": worst, "dp_ranks": dp})
