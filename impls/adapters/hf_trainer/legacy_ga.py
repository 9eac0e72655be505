"""hf_trainer.legacy-ga: the Trainer's legacy gradient-accumulation path.

A model whose forward takes no loss kwargs (`model_accepts_loss_kwargs = False`: custom models,
older remote code) gets no `num_items_in_batch`: each micro-batch's loss is its own token mean,
and the Trainer divides it by the number of accumulation steps. On uneven micro-batches that is a
mean of means. The variant sets that attribute on the real Trainer, as such a model would.
"""

from __future__ import annotations

from packcheck.harness.contract import Case
from packcheck.harness.engines import FindingKind, KnownFinding
from packcheck.impls.adapters.hf_common.capture import StepCapture
from packcheck.impls.adapters.hf_common.releases import per_micro_batch_count
from packcheck.impls.adapters.hf_trainer.engine import VARIANT_CAPABILITIES, VARIANT_RELEASES, HfTrainer, HfTrainerEngine


EVIDENCE = ("transformers 5.24.0 trainer.py: with model_accepts_loss_kwargs False, Trainer.compute_loss hands the "
            "model no num_items_in_batch (its ForCausalLMLoss takes the micro-batch mean) and the loss is divided by the "
            "accumulation steps (the compute_loss docstring: a per-batch mean is divided by them)")


class LegacyGaEngine(HfTrainerEngine):
    name = "hf_trainer.legacy-ga"
    engine_versions = VARIANT_RELEASES
    capabilities = VARIANT_CAPABILITIES
    known_findings = (
        KnownFinding(id="H1", kind=FindingKind.DEFECT, evidence=EVIDENCE,
                     scenario="microbatch_invariance", upstream="transformers#37766 (fix line: transformers#35438)",
                     summary="without loss kwargs each micro-batch is its own token mean divided by the accumulation steps (mean of means)",
                     min_margin=1.3e5, measured="dloss_dlogprobs max_rel 13.1 (margin 1.3e6), llama and qwen3 float32"),
        KnownFinding(id="H1", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="token_conservation", upstream="transformers#37766",
                     summary="the reported loss is the mean of micro-batch means, not the token mean over the step",
                     min_margin=18.0, measured="loss rel 2.4e-3 llama (margin 236), 1.9e-3 qwen3 (margin 188), float32"),
        KnownFinding(id="H1", kind=FindingKind.DEFECT, evidence=EVIDENCE, scenario="golden_regression", upstream="transformers#37766",
                     summary="per-token loss weights and gradients are those of a mean of micro-batch means",
                     min_margin=6.4e4, measured="dloss_dlogprobs max_rel 0.19 (margin 6.5e5), llama and qwen3 float32"),
    )

    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str) -> HfTrainer:
        trainer = super().build_trainer(case, capture, output_dir)
        trainer.model_accepts_loss_kwargs = False
        return trainer

    def loss_token_count(self, capture: StepCapture) -> int:
        return per_micro_batch_count(capture)  # no global count on this path
