"""prime_rl variants that reproduce prime-rl's real behaviour as its users run it, each pinned as a
known finding with its measured size (docs/findings.md, "prime-rl").

prime_rl.fused-lm-head: prime-rl's default precision path. `fused_lm_head_token_chunk_size`
defaults to 8192, so `inject_prime_lm_head` installs `FusedOutputLinear`, whose chunked
log-softmax accumulates in float32 whatever the model's dtype; `trainer/model.py::forward` casts
every output with `.float()` (`cast_float_and_contiguous`), and `DataLoader._micro_batch_to_tensor`
builds the old and reference log-probs and advantages as float32. On the GPU (bf16 weights) each
is an up-cast; in a float64 model the log-probs, the loss and every gradient carry float32 rounding.

prime_rl.logged-loss: the loss prime-rl reports for a step, `tensor_stats["loss/mean"]`: the mean of
the micro-batch losses of every rank. Each micro-batch loss is already its share of the global loss
(compute_loss divides by the global count), so their mean is L / (micro-batches x ranks); under
context parallelism every cp rank computes the whole row's loss over a count taken on full rows on
each cp rank (cp x N), so each entry is a further 1/cp. Gradients are exact; only the number differs.
"""

from __future__ import annotations

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


LOGGED_SUMMARY = ("the step loss prime-rl logs (loss/mean) is the mean of per-micro-batch shares of the global loss over "
                  "every rank: L / (micro-batches x ranks), and a further 1 / cp under context parallelism")
LOGGED_UPSTREAM = "not found in prime-rl's tracker; rl/train.py tensors['loss'] + Tensors.compute_stats"


class PrimeRLLoggedLoss(PrimeRL):
    name = "prime_rl.logged-loss"
    known_findings = ()

    def reported_loss(self, local_loss: float, local_rows: int, plan) -> float:
        group = self.world_group(plan)
        return all_reduce_sum(local_loss, group) / all_reduce_sum(float(local_rows), group)
