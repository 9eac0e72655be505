"""torchtitan's own `Trainer.train_step` on a model the adapter built, without the rest of `Trainer.__init__`.

`Trainer.__init__` also builds a tokenizer, a Hugging Face dataset loader, a checkpointer, a
metrics logger and a validator from files on disk; none of them takes part in one step from a
given iterator. So the adapter makes the Trainer object without `__init__` and sets exactly the
attributes `train_step`, `forward_backward_step`, `post_dataloading_process` and
`_forward_backward_body` read, each built the way `__init__` builds it (its parallel dims, its
SPMD context, its loss, its optimizer container) except these stand-ins:
- `metrics_processor`: records what `train_step` logs (the global average loss, the grad norm)
  instead of writing it to TensorBoard/W&B;
- `checkpointer`: nothing to wait for (no checkpoint is staged);
- `lr_schedulers`: none: the Case's step is at its constant learning rate.
What is torchtitan's: the micro-batch loop, the global valid-token count taken over every
micro-batch before the first forward, the flex document masks from positions, its sum
cross-entropy divided by that count, one backward per micro-batch into accumulated gradients, its
`clip_grad_norm_` and its AdamW step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


@dataclass
class LoggedStep:
    """What train_step handed to its metrics processor and its loss."""

    loss: float | None = None
    grad_norm: float | None = None
    valid_tokens: list[int] = field(default_factory=list)


class RecordingMetrics:
    def __init__(self, logged: LoggedStep):
        self.logged = logged
        self.ntokens_since_last_log = 0
        self.data_loading_times: list[float] = []

    def should_log(self, step: int) -> bool:
        return True  # train_step reduces the loss only for logging

    def log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None) -> None:
        self.logged.loss, self.logged.grad_norm = float(global_avg_loss), float(grad_norm)


class NoCheckpoint:
    def maybe_wait_for_staging(self) -> None:
        pass


class ConstantLR:
    def step(self) -> None:
        pass

    def get_metrics(self) -> dict:
        return {}


class CountingLoss:
    """torchtitan's loss, unchanged; records the global_valid_tokens train_step passes it."""

    def __init__(self, loss_fn, logged: LoggedStep):
        self.loss_fn, self.logged = loss_fn, logged

    def __call__(self, pred, labels, global_valid_tokens=None, **kwargs):
        self.logged.valid_tokens.append(int(global_valid_tokens))
        return self.loss_fn(pred, labels, global_valid_tokens, **kwargs)


def optimizer_config(case):
    """torchtitan's AdamW container at the Case's hyper-parameters (lr 0 when the Case asks for no step:
    train_step always steps; at lr 0 AdamW leaves every parameter as it was)."""
    from torchtitan.components.optimizer import OptimizersContainer
    from torchtitan.components.optimizer.optimizer import ParamGroupConfig

    spec = case.optimizer
    kwargs = {"lr": 0.0, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0}
    if spec is not None:
        kwargs = {"lr": spec.lr, "betas": tuple(spec.betas), "eps": spec.eps, "weight_decay": spec.weight_decay}
    return OptimizersContainer.Config(param_groups=[ParamGroupConfig(pattern=r".*", optimizer_name="AdamW", optimizer_kwargs=kwargs)])


def make_trainer(case, model, model_cfg, device: torch.device, num_micro_batches: int, logged: LoggedStep,
                 loss_class=CountingLoss):
    from torchtitan.components.loss import CrossEntropyLoss
    from torchtitan.config import ParallelismConfig, TrainingConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.trainer import Trainer

    spec = case.optimizer
    clips = spec is not None and spec.clips
    parallelism = ParallelismConfig()
    training = TrainingConfig(max_norm=spec.max_grad_norm if clips else math.inf, disable_cuda_graphs=True,
                              local_batch_size=1, global_batch_size=num_micro_batches)
    trainer = Trainer.__new__(Trainer)
    trainer.config = Trainer.Config(training=training, parallelism=parallelism)
    dist_utils.set_spmd_backend(parallelism.spmd_backend)
    trainer.device = device
    trainer.parallel_dims = ParallelDims.from_config(parallelism, world_size=1)
    trainer.model_config = model_cfg
    trainer.model_parts = [model]
    trainer.loss_fn = loss_class(CrossEntropyLoss.Config(global_vocab_size=model_cfg.vocab_size).build(compile_config=None), logged)
    trainer.gradient_accumulation_steps = num_micro_batches
    trainer.num_pipeline_parallel_microbatches = 1
    trainer.optimizers = optimizer_config(case).build(model_parts=trainer.model_parts)
    trainer.lr_schedulers = ConstantLR()
    trainer.metrics_processor = RecordingMetrics(logged)
    trainer.checkpointer = NoCheckpoint()
    trainer.step = 0
    trainer.ntokens_seen = 0
    trainer.train_context = dist_utils.get_spmd_context(parallel_dims=trainer.parallel_dims, spmd_typechecking=False)
    trainer.fwd_bwd_fn = trainer._forward_backward_body
    return trainer
