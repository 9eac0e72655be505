"""hf_trainer: one optimizer step of transformers' own `Trainer`.

Packed cases go through `DataCollatorWithFlattening` (each micro-batch becomes one row, documents
told apart by `position_ids` resets: the row length is the collator's, not the Case's `seq_len`);
unpacked cases through `DataCollatorForSeq2Seq` (rows padded on the Case's side, labels padded
with -100). The model is loaded from the Case's checkpoint with `from_pretrained` in the Case's
dtype with sdpa attention. The loss, its normalisation by `num_items_in_batch` and the gradient
accumulation are the Trainer's.

float32 only: the model runs in float64 if loaded so, but transformers' causal-LM loss
(`ForCausalLMLoss`) casts the logits with `.float()`, i.e. *down* to float32 for a float64 model,
so the loss and every gradient carry float32 rounding (variant `hf_trainer.float64` pins it).
"""

from __future__ import annotations

from dataclasses import replace

from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq, DataCollatorWithFlattening, Trainer, TrainingArguments

from packcheck.harness.contract import Case, LayoutKind
from packcheck.impls.adapters.hf_common.capture import CountsItems, RecordsGradNorm, StepCapture
from packcheck.impls.adapters.hf_common.engine import ATTENTION, DTYPES, TRAINER_CAPABILITIES, TrainerEngine, training_arguments
from packcheck.impls.adapters.hf_common.partition import PartitionedTrainer, PartitionSampler, interleaved
from packcheck.impls.adapters.hf_common.releases import (
    COUNTS_ITEMS, CountsItemsInBatchSamples, dtype_kwargs, per_micro_batch_count, read_clip_from_accelerator,
)
from packcheck.impls.adapters.hf_common.samples import examples
from packcheck.impls.adapters.hf_trainer.release_findings import RELEASE_FINDINGS
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for



# the finding variants were measured on 5.x only (their upstream notes name 5.24.0's code): they claim no more
VARIANT_RELEASES = ("transformers>=5.0,<6", "accelerate>=1.0")
# ... and without dp arms (dp came later): the variants that pin findings of one process claim no dp
VARIANT_CAPABILITIES = replace(TRAINER_CAPABILITIES, max_dp=1)


class HfTrainer(CountsItems, CountsItemsInBatchSamples, RecordsGradNorm, PartitionedTrainer, Trainer):
    """transformers.Trainer with the Case's micro-batches and the count recorded."""


def load_model(case: Case, **config):
    """The Case's checkpoint in its dtype and attention; `config` overrides entries of its config (`use_cache=True`)."""
    return AutoModelForCausalLM.from_pretrained(case.model.checkpoint, **dtype_kwargs(DTYPES[case.dtype]),
                                                attn_implementation=ATTENTION[case.attention], **config)


class HfTrainerEngine(TrainerEngine):
    name = "hf_trainer"
    capabilities = TRAINER_CAPABILITIES
    engine_versions = ("transformers>=4.45,<6", "accelerate>=0.34")
    known_findings = RELEASE_FINDINGS  # of older releases only: none holds under the pinned one

    def collator(self, case: Case):
        if case.layout.kind is LayoutKind.PACKED:
            return DataCollatorWithFlattening()
        tokenizer = tokenizer_for(case.model.vocab_size, case.layout.padding_side)
        return DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100)

    def model(self, case: Case):
        return load_model(case)

    def base_arguments(self, case: Case, output_dir: str) -> dict:
        return training_arguments(case, output_dir)

    def arguments(self, case: Case, output_dir: str) -> TrainingArguments:
        return TrainingArguments(**self.base_arguments(case, output_dir))

    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str) -> HfTrainer:
        trainer = HfTrainer(model=self.model(case), args=self.arguments(case, output_dir), train_dataset=examples(case),
                            data_collator=self.collator(case), callbacks=[capture.callback()])
        trainer.partition = PartitionSampler(interleaved(case.partition))
        trainer.capture = capture
        read_clip_from_accelerator(trainer, capture)
        return trainer

    def loss_token_count(self, capture: StepCapture) -> int:
        return super().loss_token_count(capture) if COUNTS_ITEMS else per_micro_batch_count(capture)
