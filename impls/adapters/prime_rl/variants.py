"""prime_rl variants that reproduce prime-rl's real behaviour as its users run it, each pinned as a
known finding with its measured size (docs/findings.md, "prime-rl").

prime_rl.fused-lm-head: prime-rl's default precision path. `fused_lm_head_token_chunk_size`
defaults to 8192, so `inject_prime_lm_head` installs `FusedOutputLinear`, whose chunked
log-softmax accumulates in float32 whatever the model's dtype; `trainer/model.py::forward` casts
every output with `.float()` (`cast_float_and_contiguous`), and `DataLoader._micro_batch_to_tensor`
builds the old and reference log-probs and advantages as float32. On the GPU (bf16 weights) each
is an up-cast; in a float64 model the log-probs, the loss and every gradient carry float32 rounding.

prime_rl.cp-rank-loss: the loss one rank holds for the step. rl/train.py sums the token counts of
each rank's full (unsharded) micro-batches over the dp x cp group, so under context parallelism
every token is counted cp times, and every cp rank computes the whole row's loss (its log-probs
gathered by `gather_for_cp`) over that count: each rank's loss is L / cp. The gradients are exact
(the gather's backward sums the cp ranks' contributions), so only the number a user reads differs:
without CP a rank's losses summed over data-parallel ranks are the step's loss, with CP they are
1 / cp of it. (The logged `loss/mean` is the mean of these per-micro-batch values over micro-batches
and ranks, a further convention, not pinned.)
"""

from __future__ import annotations

import torch.distributed as dist

from packcheck.harness.engines import KnownFinding
from packcheck.impls.adapters.prime_rl.engine import PrimeRL, all_reduce_sum

DEFAULT_CHUNK = 8192  # prime-rl's ModelConfig.fused_lm_head_token_chunk_size default
FUSED_SUMMARY = ("prime-rl's default LM head (FusedOutputLinear, chunk 8192) computes log-probs in float32, and forward() "
                 "and the data loader cast to float32, so a float64 model trains on float32 log-probs")
FUSED_UPSTREAM = "by design for bf16 models (lm_head.py, model.py::forward .float()); no issue"


class PrimeRLFusedLmHead(PrimeRL):
    name = "prime_rl.fused-lm-head"
    fused_lm_head = DEFAULT_CHUNK
    float32_casts = True
    known_findings = ()


CP_LOSS_SUMMARY = ("under context parallelism every cp rank computes the whole row's loss (log-probs gathered) over a count "
                   "taken on full rows on every cp rank (cp x N), so each rank's loss is L / cp; gradients are exact")
CP_LOSS_UPSTREAM = ("prime-rl PR #2562 (merged: the rl count summed over dp x cp; its review flagged that cp ranks load the same "
                    "micro-batches, 'CP overcounts global tokens'); the gather's backward sums the cp ranks' gradients back")


class PrimeRLCpRankLoss(PrimeRL):
    """prime_rl.cp-rank-loss: the step's loss as one rank reports it, its micro-batch losses summed (and summed over
    data-parallel ranks), which is the global loss without context parallelism and L / cp with it."""

    name = "prime_rl.cp-rank-loss"

    def reported_loss(self, local_loss: float, local_rows: int, plan) -> float:
        rank = dist.get_rank() if plan.world_size > 1 else 0
        return all_reduce_sum(local_loss if rank % plan.cp == 0 else 0.0, self.world_group(plan))
