"""The shape both trainer adapters share: translate the Case, run one real optimizer step of the
engine's own trainer, translate what it computed back.

A subclass says which trainer and collator the engine uses (`build_trainer`) and what it can do
(`capabilities`, `unsupported_reason`). Every Trainer setting fixed here follows from the Case:
one optimizer step (`max_steps=1`) accumulating one micro-step per micro-batch of the partition,
the trainer's own gradient clipping at the Case's `max_grad_norm` (off when it asks for none), no
mixed precision, AdamW with the Case's hyper-parameters at a constant learning rate, CPU, nothing
logged or saved. The Case's frozen parameters are frozen the way a Trainer user freezes them
(`requires_grad_(False)` before training: the Trainer leaves them out of its optimizer).

Data parallelism is the Trainer's own: every launched rank runs `run`, accelerate adopts the
launcher's gloo default process group (MULTI_CPU: torch.distributed is already initialised, so it
joins rather than creates one), wraps the model in DDP and shards the global batch sampler
(partition.py); rank 0 returns the ranks' combined step (ranks.py).
"""

from __future__ import annotations

import tempfile
from abc import abstractmethod

import torch

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.engines import Capabilities, Engine
from packcheck.harness.engines.capture import active_recorder
from packcheck.impls.adapters.hf_common.activations import attach_recorder
from packcheck.impls.adapters.hf_common.capture import StepCapture
from packcheck.impls.adapters.hf_common.partition import rank_micro_batches
from packcheck.impls.adapters.hf_common.ranks import combine_ranks
from packcheck.impls.adapters.hf_common.releases import FAMILIES, MAX_DP
from packcheck.impls.adapters.hf_common.result import step_result

DTYPES = {"float64": torch.float64, "float32": torch.float32}
ATTENTION = {"auto": "sdpa", "sdpa": "sdpa"}
PACKED_AND_PADDED = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
# float32 only: both engines compute the loss in float32 whatever the model's dtype (docs/findings.md, H3)
TRAINER_CAPABILITIES = Capabilities(
    families=FAMILIES,
    layouts=PACKED_AND_PADDED,
    dtypes=frozenset({"float32"}),
    reports=frozenset({"dloss_dlogprobs", "params_after", "grad_norm"}),
    attention={name: PACKED_AND_PADDED for name in ATTENTION},
    max_dp=MAX_DP,  # accelerate's DDP over the launcher's gloo group (the dp2 arms: docs/findings.md)
    activations=True,  # its model's named_modules, hooked when a localisation asks (activations.py)
)


def training_arguments(case: Case, output_dir: str) -> dict:
    opt = case.optimizer
    return dict(
        output_dir=output_dir,
        max_steps=1,
        per_device_train_batch_size=1,  # the partition's batch sampler decides the micro-batches
        gradient_accumulation_steps=len(case.partition.per_rank[0]),  # every rank runs as many (Partition.check)
        max_grad_norm=opt.max_grad_norm if opt is not None and opt.clips else 0.0,  # 0: the Trainer does not clip
        optim="adamw_torch",
        lr_scheduler_type="constant",
        **({} if opt is None else dict(learning_rate=opt.lr, adam_beta1=opt.betas[0], adam_beta2=opt.betas[1],
                                       adam_epsilon=opt.eps, weight_decay=opt.weight_decay)),
        bf16=False,  # the Case's dtype, no mixed precision (TRL's configs default to bf16 autocast)
        fp16=False,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
    )


class TrainerEngine(Engine):
    """Base of the adapters whose engine is a transformers Trainer (plain or TRL's)."""

    @abstractmethod
    def build_trainer(self, case: Case, capture: StepCapture, output_dir: str):
        """The engine's own trainer for `case`, with `capture.callback()` among its callbacks."""

    def reports_weights(self) -> bool:
        return "dloss_dlogprobs" in self.capabilities.reports

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        capture = StepCapture()
        with tempfile.TemporaryDirectory(prefix=f"packcheck-{self.name}-") as output_dir:
            trainer = self.build_trainer(case, capture, output_dir)
            for name, parameter in trainer.model.named_parameters():
                parameter.requires_grad_(not case.model.is_frozen(name))
            handles = capture.attach(trainer.model)
            if (recorder := active_recorder()) is not None:  # a localisation's capture; None on every ordinary run
                attach_recorder(recorder, trainer.model, case, rank_micro_batches(case))
            try:
                output = trainer.train()
            finally:
                for handle in handles:
                    handle.remove()
        local = step_result(case, capture, output.training_loss, rank_micro_batches(case),
                            self.loss_token_count(capture), self.reports_weights())
        return local if case.parallel.dp == 1 else combine_ranks(case, local)

    def loss_token_count(self, capture: StepCapture) -> int:
        """The trainer's own `num_items_in_batch` for the one optimizer step."""
        (count,) = capture.counts
        if count is None:
            raise RuntimeError("the trainer computed no num_items_in_batch; override loss_token_count for this engine")
        return count
