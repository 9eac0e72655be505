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
(the gather's backward sums the cp ranks' contributions, which the cp-fold count divides back out: the
count is what keeps them exact), so this is a reported-metric discrepancy only, the number a user reads:
without CP a rank's losses summed over data-parallel ranks are the step's loss, with CP they are
1 / cp of it. (The logged `loss/mean` is the mean of these per-micro-batch values over micro-batches
and ranks, a further convention, not pinned.)
"""

from __future__ import annotations

import torch.distributed as dist

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.prime_rl.engine import PrimeRL, all_reduce_sum

DEFAULT_CHUNK = 8192  # prime-rl's ModelConfig.fused_lm_head_token_chunk_size default
FUSED_SUMMARY = ("prime-rl's default LM head (FusedOutputLinear, chunk 8192) computes log-probs in float32, and forward() "
                 "and the data loader cast to float32, so a float64 model trains on float32 log-probs")
FUSED_UPSTREAM = "none found (by design for bf16 models)"
FUSED_EVIDENCE = ("prime-rl 559b447 src/prime_rl/trainer/models/layers/lm_head.py: FusedOutputLinear (chunk 8192, the "
                  "ModelConfig default) accumulates in float32; trainer/model.py: forward casts outputs with cast_float_and_contiguous; "
                  "DataLoader._micro_batch_to_tensor builds old log-probs as float32")


def fused(scenario: str, min_margin: float, measured: str) -> KnownFinding:
    return KnownFinding(id="P2", kind=FindingKind.DESIGN_CHOICE, evidence=FUSED_EVIDENCE, scenario=scenario, summary=FUSED_SUMMARY,
                        upstream=FUSED_UPSTREAM, min_margin=min_margin, measured=measured)


class PrimeRLFusedLmHead(PrimeRL):
    name = "prime_rl.fused-lm-head"
    fused_lm_head = DEFAULT_CHUNK
    float32_casts = True
    # measured with `packcheck run --engine prime_rl.fused-lm-head --family llama qwen3` (float64, 559b447); min_margin is
    # about a tenth of the smaller family's worst margin. document_isolation and linear_attention_reset pass (exact zeros).
    # Margins of 50-450 are float32 rounding at the float64 tolerance: on another CPU kernel path a cell may round to a
    # pass (an unexpected pass there is not an upstream fix).
    known_findings = (
        fused("packed_vs_unpacked", 14.0, "loss rel 1.4e-8 (margin 143) llama, 4.3e-8 (430) qwen3"),
        fused("microbatch_invariance", 22.0, "loss rel 2.2e-8 (margin 221) llama, 3.5e-8 (345) qwen3"),
        fused("mask_alignment", 20.0, "loss rel 2.0e-8 against its own log-probs (margin 204) llama, 3.8e-8 (378) qwen3"),
        fused("token_conservation", 4.7, "loss rel 1.2e-8 against its own log-probs (margin 124) llama, 4.7e-9 (47) qwen3"),
        fused("golden_regression", 690.0, "log-probs max_abs 6.9e-7 (margin 6.9e3) llama, 7.2e-7 (7.2e3) qwen3"),
        fused("cp_vs_nocp", 28.0, "loss rel 4.5e-8 on cp4_ulysses_seq50 (margin 451) llama, 2.8e-8 (281) qwen3"),
        # qwen3's float32 roundings happen to cancel here (dp_cp_reduction passes at 4.5e-6 of the tolerance)
        KnownFinding(id="P2", kind=FindingKind.DESIGN_CHOICE, evidence=FUSED_EVIDENCE,
                     scenario="dp_cp_reduction", summary=FUSED_SUMMARY, upstream=FUSED_UPSTREAM, min_margin=22.0,
                     measured="loss rel 2.2e-8 on dp2_cp1_uneven (margin 221) llama", families=frozenset({"llama"})),
        fused("rl_loss_aggregation", 977.0, "loss rel 9.8e-7 (margin 9.8e3) llama, 1.9e-6 (1.9e4) qwen3 on token-mean/kl"),
        fused("rl_step0_ratio", 156.0, "loss rel 1.6e-7 on packed_uneven_from_unpacked (margin 1.6e3) both families: old "
              "log-probs travel as float32"),
        fused("vlm_collective_symmetry", 5.6, "loss rel 1.7e-8 on dp2_packed (margin 168) llama, 5.6e-9 (56) qwen3"),
        fused("optimizer_step", 11.0, "loss rel 2.2e-8 on dp2_replicate (margin 221) llama, 1.1e-8 on dp1_uneven (111) qwen3"),
        fused("gradient_oracle", 690.0, "log-probs max_abs 6.9e-7 (margin 6.9e3) llama, 7.2e-7 (7.2e3) qwen3 against the "
              "oracle arms"),
    )


CP_LOSS_SUMMARY = ("a reported-metric discrepancy only: under context parallelism every cp rank computes the whole row's loss "
                   "(log-probs gathered) over a count taken on full rows on every cp rank (cp x N), so each rank reports L / cp; "
                   "the gradients are exact, since that cp-fold count is what offsets all_gather's summing backward")
CP_LOSS_UPSTREAM = ("prime-rl PR #2562 (merged: the rl count summed over dp x cp; its review flagged that cp ranks load the same "
                    "micro-batches, 'CP overcounts global tokens'); no issue about the reported loss found")
CP_LOSS_EVIDENCE = ("prime-rl 559b447 src/prime_rl/trainer/rl/train.py: the rl token count all-reduced over dp x cp from each rank's "
                    "full micro-batches; utils/cp.py: gather_for_cp, whose backward sums the cp ranks' gradients")


class PrimeRLCpRankLoss(PrimeRL):
    """prime_rl.cp-rank-loss: the step's loss as one rank reports it, its micro-batch losses summed (and summed over
    data-parallel ranks), which is the global loss without context parallelism and L / cp with it."""

    name = "prime_rl.cp-rank-loss"
    # measured with `packcheck run --engine prime_rl.cp-rank-loss` (float64, 559b447); the loss is off by exactly
    # 1 - 1/cp, log-probs, counts and gradients pass. Without CP it is the main adapter (microbatch_invariance passes).
    known_findings = tuple(f for f in PrimeRL.known_findings) + tuple(
        KnownFinding(id="P3", kind=FindingKind.METRIC_DISCREPANCY, evidence=CP_LOSS_EVIDENCE, scenario=scenario,
                     summary=CP_LOSS_SUMMARY, upstream=CP_LOSS_UPSTREAM, min_margin=min_margin, measured=measured)
        for scenario, min_margin, measured in (
            ("cp_vs_nocp", 4.9e8, "loss rel 0.5 at cp2, 0.75 at cp4_ulysses (margin 7.5e9), llama and qwen3"),
            ("dp_cp_reduction", 4.9e8, "loss rel 0.5 on dp1_cp2_ulysses (margin 5.0e9), llama and qwen3"),
            ("optimizer_step", 4.9e8, "loss rel 0.5 on cp2_ulysses (margin 5.0e9), llama and qwen3"),
            ("linear_attention_reset", 4.9e8, "loss rel 0.5 on cp2_ulysses (margin 5.0e9), llama and qwen3"),
        ))

    def reported_loss(self, local_loss: float, plan) -> float:
        rank = dist.get_rank() if plan.world_size > 1 else 0
        return all_reduce_sum(local_loss if rank % plan.cp == 0 else 0.0, self.world_group(plan))
