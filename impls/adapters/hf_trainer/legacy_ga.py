"""hf_trainer.legacy-ga: the Trainer's legacy gradient-accumulation path.

A model whose forward takes no loss kwargs (`model_accepts_loss_kwargs = False`: custom models,
older remote code) gets no `num_items_in_batch`: each micro-batch's loss is its own token mean,
and the Trainer divides it by the number of accumulation steps. On uneven micro-batches that is a
mean of means. The variant sets that attribute on the real Trainer, as such a model would.
"""

from __future__ import annotations

from harness.contract import Case
from impls.adapters.hf_common.capture import StepCapture
from impls.adapters.hf_trainer.engine import HfTrainer, HfTrainerEngine


class LegacyGaEngine(HfTrainerEngine):
    name = "hf_trainer.legacy-ga"
    known_findings = ()

    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str) -> HfTrainer:
        trainer = super().build_trainer(case, capture, output_dir)
        trainer.model_accepts_loss_kwargs = False
        return trainer

    def loss_token_count(self, capture: StepCapture) -> int:
        # no global count on this path: each micro-batch's loss divides by its own count of
        # shifted labels != -100 (ForCausalLMLoss's mean), and these add up to what it counted
        return sum(int((mb.inputs["labels"][:, 1:] != -100).sum()) for mb in capture.micro_batches)
