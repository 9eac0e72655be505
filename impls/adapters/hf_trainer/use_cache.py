"""hf_trainer.use-cache: the Trainer with `TrainingArguments(use_cache=True)`.

transformers detects packed sequences from `position_ids` only when there is no attention mask
*and no cache* (`masking_utils`); with the cache enabled the training forward builds a
`DynamicCache`, the detection is skipped, and a flattened row is one causal sequence: every
document attends to the ones before it in the row. Nothing warns.
"""

from __future__ import annotations

from transformers import TrainingArguments

from harness.contract import Case
from impls.adapters.hf_trainer.engine import HfTrainerEngine


class UseCacheEngine(HfTrainerEngine):
    name = "hf_trainer.use-cache"
    known_findings = ()

    def arguments(self, case: Case, output_dir: str) -> TrainingArguments:
        return TrainingArguments(**self.base_arguments(case, output_dir), use_cache=True)
