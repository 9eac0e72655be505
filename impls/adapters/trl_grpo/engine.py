"""trl_grpo: one optimizer step of TRL's own `GRPOTrainer` on the Case's rollout.

Generation and scoring are what the Case replaces: the Case already holds the completions, their
advantages and the old / reference log-probs. `_prepare_inputs` (the trainer's documented seam
between generation and the loss) returns them for the micro-batch the dataloader yields; the rest
is TRL's: the policy loss and its aggregation (`_compute_loss`), the fused LM head that computes the
log-probs, the Trainer's gradient accumulation, clipping and AdamW. The reward function is never
called (no generation). batch.py says how a sample becomes a prompt and a completion.

What the Case's LossSpec maps to (GRPOConfig): clip_low / clip_high -> epsilon / epsilon_high;
dual_clip -> delta (TRL clamps the ratio at delta before the pessimistic min: for c > 1 + clip_high,
which the contract requires, this is the dual clip for A < 0 and changes nothing for A > 0);
kl_coef -> beta with use_bias_correction_kl=False (the contract's k3 against ref_per_token_logps; TRL's
default multiplies it by the ratio, DeepSeek-V3.2's unbiased estimator, another objective by design). The aggregation is the
loss type's: `dapo` divides every micro-batch's token sum by the generation batch's loss-token
count (num_items_in_batch, over every micro-batch and rank), which is the contract's token-mean.
Its other loss types normalise per micro-batch by design (`grpo`, `bnpo`, `dr_grpo`: variants.py),
and its entropy bonus is a token mean per micro-batch whatever the loss type, so the engine declares
token-mean without the entropy term. TRL has no padding-free mode: one sample per row, padded layouts only.

float32 only, like trl_sft: the fused LM head keeps its statistics in float32.

Data parallelism is hf_common's (accelerate's DDP on the launcher's ranks): `dapo` divides by
num_items / num_processes and DDP averages, the global token mean. Only where every rank holds as many
sequences per micro-step: TRL's clip-ratio metrics gather one value per sequence (docs/findings.md, T2).
"""

from __future__ import annotations

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from packcheck.harness.contract import Aggregation, Case, LayoutKind, LossKind
from packcheck.harness.engines import Capabilities
from packcheck.impls.adapters.hf_common.capture import RecordsGradNorm, StepCapture
from packcheck.impls.adapters.hf_common.engine import ATTENTION, DTYPES, TRAINER_CAPABILITIES, TrainerEngine, training_arguments
from packcheck.impls.adapters.hf_common.partition import PartitionedTrainer, PartitionSampler, interleaved, rank_micro_batches
from packcheck.impls.adapters.hf_common.tokenizer import tokenizer_for
from packcheck.impls.adapters.trl_grpo.batch import loss_tokens, micro_batch_inputs

PADDED = frozenset({LayoutKind.UNPACKED})
SAMPLE = "sample"  # the dataset column holding the Case's sample index


def never_called(*args, **kwargs):
    raise AssertionError("the reward function ran: the adapter replaces generation and scoring with the Case's rollout")


class TrlGrpoTrainer(RecordsGradNorm, PartitionedTrainer, GRPOTrainer):
    """trl.GRPOTrainer whose generation step returns the Case's rollout for the micro-batch the dataloader yields."""

    case: Case
    num_items: torch.Tensor | None = None

    def _prepare_inputs(self, generation_batch):
        if not self.model.training:
            raise AssertionError("the adapter runs training steps only")
        sample_ids = tuple(row[SAMPLE] for row in generation_batch)
        if self.num_items is None:  # TRL's count over the rank's generation batch (batch.py)
            local = torch.tensor(sum(loss_tokens(self.case, mb) for mb in rank_micro_batches(self.case)), device=self.accelerator.device)
            self.num_items = self.accelerator.gather(local).sum()
        inputs = micro_batch_inputs(self.case, sample_ids, DTYPES[self.case.dtype])
        return {k: v.to(self.accelerator.device) for k, v in inputs.items()} | {"num_items_in_batch": self.num_items}


class TrlGrpoEngine(TrainerEngine):
    name = "trl_grpo"
    loss_types = {Aggregation.TOKEN_MEAN: "dapo"}  # the contract's mode -> TRL's loss type that computes it
    capabilities = Capabilities(
        families=TRAINER_CAPABILITIES.families,
        layouts=PADDED,
        dtypes=TRAINER_CAPABILITIES.dtypes,
        losses=frozenset({LossKind.PPO_CLIP}),
        aggregations=frozenset(loss_types),
        loss_terms=frozenset({"dual_clip", "kl"}),
        reports=TRAINER_CAPABILITIES.reports,
        attention={name: PADDED for name in ATTENTION},
        max_dp=TRAINER_CAPABILITIES.max_dp,
    )

    def unsupported_reason(self, case: Case) -> str | None:
        reason = super().unsupported_reason(case)
        if reason is None and case.layout.padding_side == "left":
            return "GRPOTrainer pads prompts on the left and completions on the right; a whole sample cannot be left-padded"
        if reason is None and len({tuple(len(mb) for mb in rank) for rank in case.partition.per_rank}) > 1:
            return (f"GRPOTrainer needs as many sequences per micro-step on every rank ({case.partition.describe()} differ): its "
                    "clip-ratio metrics accelerator.gather one value per sequence in every micro-step (gloo aborts: 'Received "
                    "data size doesn't match'); its own sampler always gives every rank per_device_train_batch_size sequences")
        return reason

    def config(self, case: Case, output_dir: str) -> GRPOConfig:
        spec = case.loss
        args = training_arguments(case, output_dir) | dict(per_device_train_batch_size=2)  # the partition decides; TRL wants 2 | it
        return GRPOConfig(**args, num_generations=2, loss_type=self.loss_types[spec.aggregation], epsilon=spec.clip_low, epsilon_high=spec.clip_high,
                          delta=spec.dual_clip, beta=spec.kl_coef, use_bias_correction_kl=False, entropy_coef=0.0, remove_unused_columns=False,
                          model_init_kwargs={"dtype": DTYPES[case.dtype], "attn_implementation": ATTENTION[case.attention]})

    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str) -> TrlGrpoTrainer:
        dataset = Dataset.from_dict({"prompt": ["t1"] * len(case.samples), SAMPLE: list(range(len(case.samples)))})
        trainer = TrlGrpoTrainer(model=case.model.checkpoint, reward_funcs=never_called, args=self.config(case, output_dir),
                                 train_dataset=dataset, processing_class=tokenizer_for(case.model.vocab_size, "left"),
                                 callbacks=[capture.callback()])
        trainer.partition = PartitionSampler(interleaved(case.partition))
        trainer.case = case
        trainer.capture = capture
        self.trainer = trainer
        return trainer

    def loss_token_count(self, capture: StepCapture) -> int:
        """The loss-token count TRL normalises by (num_items_in_batch)."""
        return int(self.trainer.num_items)
