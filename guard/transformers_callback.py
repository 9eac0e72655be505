"""The guard in transformers' Trainer and TRL's trainers built on it (SFTTrainer with padding_free, or a
DataCollatorWithFlattening): one callback, no other change to the run.

    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=DataCollatorWithFlattening())
    trainer.add_callback(PackingGuardCallback())        # or callbacks=[PackingGuardCallback()]
    trainer.train()                                     # GuardFailure on the first batch if the packed path is wrong

At the start of training it hooks the model's forward: a training forward with labels is the batch exactly as the
Trainer feeds the model (num_items_in_batch included), and the guard (check.py) checks it there, before the forward
goes on. The gradient accumulation steps are the Trainer's. A model call without labels (TRL's GRPO computes its policy
loss outside the model) is not checked, and the callback says so once.
"""

from __future__ import annotations

import warnings

import torch
from transformers import TrainerCallback

from packcheck.guard.check import Guard


class PackingGuardCallback(TrainerCallback):
    def __init__(self, **options):
        """`options`: Guard's (first, regrow, on_failure, case_dir, shrink, localise); accumulation is the Trainer's."""
        self.options = options
        self.guard: Guard | None = None
        self.handle = None
        self.said_no_labels = False

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.guard = Guard(accumulation=args.gradient_accumulation_steps, **self.options)
        self.handle = model.register_forward_pre_hook(self._before_forward, with_kwargs=True)

    def on_train_end(self, args, state, control, **kwargs):
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    def _before_forward(self, model, args, kwargs):
        if self.guard is None or self.guard.busy or not model.training or not torch.is_grad_enabled():
            return None
        if args or "labels" not in kwargs or "input_ids" not in kwargs:
            if not self.said_no_labels:
                self.said_no_labels = True
                warnings.warn("packcheck guard: the model is called without labels (or without input_ids): its loss is "
                              "computed outside the model, which the callback does not check (docs/guard.md)", stacklevel=2)
            return None
        self.guard(model, dict(kwargs))
        return None
