"""The trainer adapters' capture hook (harness/engines/capture.py): the transformers model's named_modules name the
points, and before each training forward the batch the trainer's collator built says where each sample sits (rows.py,
the same spans the result is read back with), micro-batch by micro-batch in the order the trainer runs them.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import Case
from packcheck.harness.engines.capture import ActivationRecorder
from packcheck.impls.adapters.hf_common.rows import spans


def attach_recorder(recorder: ActivationRecorder, model: torch.nn.Module, case: Case,
                    micro_batches: tuple[tuple[int, ...], ...]) -> None:
    """Hook `model` (the trainer's) for the localisation's capture."""
    forwards = iter(micro_batches)

    def place(module, args, kwargs) -> None:
        if not module.training or not torch.is_grad_enabled():
            return
        inputs = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        sample_BT = torch.full(inputs["input_ids"].shape, -1, dtype=torch.long)
        token_BT = torch.full_like(sample_BT, -1)
        for span in spans(inputs, next(forwards), case.samples):
            length = len(case.samples[span.sample].input_ids)
            sample_BT[span.row, span.start:span.start + length] = span.sample
            token_BT[span.row, span.start:span.start + length] = torch.arange(length)
        recorder.place(sample_BT, token_BT)

    model.register_forward_pre_hook(place, with_kwargs=True)  # before the recorder's own: it takes this forward's places
    recorder.attach(model)
