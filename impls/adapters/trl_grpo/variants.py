"""trl_grpo variants: GRPOTrainer configured the way its users configure it, with the loss type TRL
names for each aggregation, which TRL normalises per micro-batch by design.

trl_grpo.per-micro-batch: `loss_type="bnpo"` for token-mean (the token mean of the "local batch") and
`loss_type="grpo"` for seq-mean-token-mean (the GRPO paper's loss: each sequence's token mean, then
the mean over sequences). TRL takes both over one micro-batch and divides by the number of
accumulation steps M:
- bnpo: sum_m (sum_{i in B_m, t} l / N_m) / M instead of sum_{i, t} l / N;
- grpo: sum_m ((1 / |B_m|) sum_{i in B_m} mean_i) / M instead of sum_i mean_i / G, where |B_m| counts
  the micro-batch's rows, a fully masked sample's too (G does not), so it differs even with one
  micro-batch.
TRL's GRPOConfig documents both as normalised over the local batch (and recommends `dapo`, which the
main adapter uses, for a global count): a declared design choice, not a bug to report upstream. The
sizes are pinned here so that a change in TRL shows.
"""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.contract import Aggregation
from packcheck.harness.engines import KnownFinding
from packcheck.impls.adapters.trl_grpo.engine import TrlGrpoEngine

UPSTREAM = "by design: TRL's GRPOConfig.loss_type docs ('grpo', 'bnpo' normalise over the local batch; 'dapo' globally)"
SUMMARY = ("loss_type='bnpo' / 'grpo' normalise each micro-batch by its own token count / row count (fully masked rows "
           "included) and divide by the accumulation steps, instead of by the global batch's N / G")


class TrlGrpoPerMicroBatch(TrlGrpoEngine):
    name = "trl_grpo.per-micro-batch"
    loss_types = {Aggregation.TOKEN_MEAN: "bnpo", Aggregation.SEQ_MEAN_TOKEN_MEAN: "grpo"}
    capabilities = replace(TrlGrpoEngine.capabilities, aggregations=frozenset(loss_types))
    known_findings = (
        KnownFinding(scenario="rl_loss_aggregation", summary=SUMMARY, upstream=UPSTREAM, min_margin=1.0, measured="TBD"),
        KnownFinding(scenario="rl_step0_ratio", summary=SUMMARY, upstream=UPSTREAM, min_margin=1.0, measured="TBD"),
    )
