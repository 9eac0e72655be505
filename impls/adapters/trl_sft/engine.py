"""trl_sft: one optimizer step of TRL's own `SFTTrainer`.

The Case's samples are a pre-tokenised `datasets.Dataset` with an `assistant_masks` column (the
loss mask), from which TRL builds its labels itself. Packed cases use TRL's `padding_free=True`
(its collator flattens each micro-batch into one row with `position_ids` resets and
`cu_seq_lens`: the row length is the collator's, not the Case's `seq_len`); unpacked cases its
padded collator, which pads on the right only (left padding is rejected). TRL loads the model from
the checkpoint path itself (`model_init_kwargs`), with sdpa attention. TRL's fused LM head computes
the per-token log-probs and the loss, normalised by the Trainer's `num_items_in_batch`.

`packing=True` (BFD) is not used: it packs the whole dataset into rows before the sampler runs, so
micro-batches could not follow the Case's partition.

float32 only: the fused LM head (`trl.kernels.chunked_logprob`) keeps its softmax statistics and
gradient accumulators in float32 whatever the model's dtype.
"""

from __future__ import annotations

from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from packcheck.harness.contract import Case, LayoutKind
from packcheck.impls.adapters.hf_common.capture import CountsItems, RecordsGradNorm, StepCapture
from packcheck.impls.adapters.hf_common.engine import ATTENTION, DTYPES, TRAINER_CAPABILITIES, TrainerEngine, training_arguments
from packcheck.impls.adapters.hf_common.partition import PartitionedTrainer, PartitionSampler, interleaved
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for



class TrlSftTrainer(CountsItems, RecordsGradNorm, PartitionedTrainer, SFTTrainer):
    """trl.SFTTrainer with the Case's micro-batches and the count recorded."""


def dataset(case: Case) -> Dataset:
    return Dataset.from_dict({"input_ids": [list(s.input_ids) for s in case.samples],
                              "assistant_masks": [list(s.loss_mask) for s in case.samples]})


class TrlSftEngine(TrainerEngine):
    name = "trl_sft"
    capabilities = TRAINER_CAPABILITIES
    # run on trl 1.16.0 only (the trl extra); older TRL builds its padding-free batches and labels differently
    engine_versions = ("trl>=1.16,<2", "transformers>=5.0,<6")

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is None and case.layout.kind is LayoutKind.UNPACKED and case.layout.padding_side == "left":
            return "TRL's padded collator pads on the right only"
        return reason

    def config(self, case: Case, output_dir: str) -> SFTConfig:
        return SFTConfig(**training_arguments(case, output_dir),
                         model_init_kwargs={"dtype": DTYPES[case.dtype], "attn_implementation": ATTENTION[case.attention]},
                         padding_free=case.layout.kind is LayoutKind.PACKED, packing=False, max_length=None)

    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str) -> TrlSftTrainer:
        trainer = TrlSftTrainer(model=case.model.checkpoint, args=self.config(case, output_dir), train_dataset=dataset(case),
                                processing_class=tokenizer_for(case.model.vocab_size), callbacks=[capture.callback()])
        trainer.partition = PartitionSampler(interleaved(case.partition))
        trainer.capture = capture
        return trainer
