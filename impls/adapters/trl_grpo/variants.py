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
TRL's GRPOConfig documents bnpo as normalised over the local batch only, and grpo per sequence
(not recommended for its length bias); `dapo`, its default and the main adapter's, normalises over the
global accumulated batch: a declared design choice, not a bug to report upstream. The
sizes are pinned here so that a change in TRL shows.
"""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.contract import Aggregation
from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.trl_grpo.engine import TrlGrpoEngine

UPSTREAM = ("none found (no issue: a declared design choice; GRPOConfig.loss_type docs: bnpo 'normalization is performed over "
            "the local batch only'; dapo, the default, over the global accumulated batch)")
EVIDENCE = ("TRL 1.16.0 trl/trainer/grpo_trainer.py: GRPOTrainer._compute_loss normalises bnpo by the micro-batch's token count "
            "and grpo by its rows, then divides by the accumulation steps; trl/trainer/grpo_config.py: GRPOConfig.loss_type")
SUMMARY = ("loss_type='bnpo' / 'grpo' normalise each micro-batch by its own token count / row count (fully masked rows "
           "included) and divide by the accumulation steps, instead of by the global batch's N / G")


class TrlGrpoPerMicroBatch(TrlGrpoEngine):
    name = "trl_grpo.per-micro-batch"
    loss_types = {Aggregation.TOKEN_MEAN: "bnpo", Aggregation.SEQ_MEAN_TOKEN_MEAN: "grpo"}
    capabilities = replace(TrlGrpoEngine.capabilities, aggregations=frozenset(loss_types))
    known_findings = (
        # measured with `packcheck run --engine trl_grpo.per-micro-batch --scenario rl_loss_aggregation rl_step0_ratio
        # --dtype float32`, the same on llama and qwen3 (docs/findings.md); min_margin is a tenth of the worst margin
        KnownFinding(id="T1", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="rl_loss_aggregation", summary=SUMMARY, upstream=UPSTREAM, min_margin=2.6e5,
                     measured="bnpo (token-mean) uneven_unpacked: loss 1.47 for -0.058 (rel 26.6, margin 2.7e6), token weights "
                              "max-rel 3.5; grpo (seq-mean-token-mean): rel 0.111 = 1/9 with one micro-batch (the fully masked "
                              "row counts), loss 0.20 and weights 0.20 uneven; llama and qwen3, float32"),
        KnownFinding(id="T1", kind=FindingKind.DESIGN_CHOICE, evidence=EVIDENCE,
                     scenario="rl_step0_ratio", summary=SUMMARY, upstream=UPSTREAM, min_margin=7.0e3,
                     measured="bnpo, unpacked_uneven_from_unpacked: ratios 1 (9.5e-7) but loss rel 0.71 (margin 7.1e4), "
                              "token weights max-rel 0.41; llama and qwen3, float32"),
    )
