"""hf_trainer.moe: the Trainer on the MoE family (qwen3_moe), router aux loss on.

transformers' MoE causal LM computes its load-balancing loss inside each forward, from that
micro-batch's own routing (`load_balancing_loss_func` over the forward's non-padding tokens), and
adds router_aux_loss_coef x aux_loss to the micro-batch's loss. With `num_items_in_batch` the
Trainer does not divide micro-batch losses by the accumulation steps, so the step backpropagates
coef x the SUM of per-micro-batch aux losses: the aux term's weight grows with the number of
micro-batches, and each uses its own routing fractions (the mechanism of
mutant.moe-router-counts-local, and a scale on top). Packed (flattened, position_ids) and padded
(attention_mask) rows of the same micro-batch give the same aux loss: that part holds.
"""

from __future__ import annotations

from dataclasses import replace

from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.hf_trainer.engine import VARIANT_CAPABILITIES, VARIANT_RELEASES, HfTrainerEngine

UPSTREAM = "none found (TRL#6083 divides the aux loss by the accumulation steps in GRPO for this reason)"
EVIDENCE = ("transformers 5.24.0 models/qwen3_moe/modeling_qwen3_moe.py: Qwen3MoeForCausalLM.forward adds "
            "`router_aux_loss_coef * aux_loss` per forward; trainer.py sums the micro-batch losses when the model accepts "
            "num_items_in_batch")
SUMMARY = "the router aux loss is computed per micro-batch and summed over micro-batches (its weight grows with their number)"


class MoeEngine(HfTrainerEngine):
    name = "hf_trainer.moe"
    engine_versions = VARIANT_RELEASES
    capabilities = replace(VARIANT_CAPABILITIES, families=frozenset({"qwen3_moe"}))
    known_findings = (
        KnownFinding(id="H4", kind=FindingKind.DEFECT, evidence=EVIDENCE,
                     scenario="microbatch_invariance", summary=SUMMARY, upstream=UPSTREAM, min_margin=8.4e4,
                     measured="aux_loss rel 8.4 for nine singleton micro-batches (19.05 vs 2.03, margin 8.4e5), router gate grads "
                              "max_rel 2.8 (margin 2.8e4); router counts and log-probs agree; qwen3_moe float32, 2026-12-01"),
        KnownFinding(id="H4", kind=FindingKind.DEFECT, evidence=EVIDENCE,
                     scenario="golden_regression", summary=SUMMARY, upstream=UPSTREAM, min_margin=2.7e5,
                     measured="aux_loss rel 1.03 over the golden case's micro-batches (4.09 vs 2.01, margin 2.7e6), router gate "
                              "params_after cond_max_rel 6.3e-2; qwen3_moe float32, 2026-12-01"),
        KnownFinding(id="H4", kind=FindingKind.DEFECT, evidence=EVIDENCE,
                     scenario="gradient_oracle", summary=SUMMARY, upstream=UPSTREAM, min_margin=2.6e5,
                     measured="aux_loss rel 1.03 against the float64 reference over two micro-batches (margin 2.7e6), router gate "
                              "grads max_rel 0.105 (margin 7.7e3); log-probs agree (margin 0.089); qwen3_moe float32, 2026-12-01"),
    )
