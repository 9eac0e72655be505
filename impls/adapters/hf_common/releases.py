"""What differs between the transformers releases the Trainer adapters run on, bridged in one place.

Found by running hf_trainer under 4.45.2, 5.0.0 and 5.24.0 (the releases `nox -s releases` installs) and
reading the Trainer of the wheels in between (docs/findings.md):

- `from_pretrained(dtype=...)` is 4.56's name; before, only `torch_dtype=` (4.45 passes `dtype` on to
  the model's `__init__`, which rejects it);
- `Trainer._clip_grad_norm` / `_get_grad_norm` (where `RecordsGradNorm` reads the pre-clip gradients
  and norm) arrived during 5.x (absent in 5.0.0, present in 5.24.0); before, the Trainer clips inline
  through `accelerator.clip_grad_norm_` and calls `on_pre_optimizer_step` with the gradients already
  clipped, so there the adapter reads them where accelerate clips (`read_clip_from_accelerator`);
- `num_items_in_batch` (the step's token count) exists from 4.46: 4.45's Trainer has no global count
  at all, each micro-batch's loss is its own token mean and accelerate divides it by the accumulation
  steps (the legacy path `hf_trainer.legacy-ga` reaches on 5.x; a known finding of 4.45,
  hf_trainer/release_findings.py); `get_batch_samples` computes it inline up to 4.56 and calls
  `_get_num_items_in_batch` (where `CountsItems` reads it) from 4.57 on;
- Qwen3 is defined from 4.51: the families the adapter declares are those the release defines;
- `TrainingArguments.use_cache` exists from 5.0, where the Trainer writes it (default False) into the
  model's config; before, the Trainer leaves the checkpoint's `use_cache` as it is (read in the 4.53.1
  and 5.24.0 wheels).
"""

from __future__ import annotations

import torch
import transformers
from packaging.version import Version
from transformers import Trainer, TrainingArguments

from packcheck.impls.adapters.hf_common.capture import StepCapture

RELEASE = Version(transformers.__version__)
DTYPE_KWARG = "dtype" if RELEASE >= Version("4.56") else "torch_dtype"
COUNTS_ITEMS = hasattr(Trainer, "get_batch_samples")  # the Trainer computes num_items_in_batch (4.46 on)
CLIPS_IN_HOOK = hasattr(Trainer, "_clip_grad_norm")  # RecordsGradNorm's hooks exist (later 5.x)
TRAINER_SETS_USE_CACHE = "use_cache" in TrainingArguments.__dataclass_fields__  # 5.0 on
# dp through accelerate was measured under the pinned release only (docs/findings.md): 4.45 has no global
# count at all (H6), and the releases in between were not run with dp arms, so they keep dp=1
MAX_DP = 2 if RELEASE >= Version("5.24") else 1
# the families this release defines (Qwen3 arrived in 4.51)
FAMILIES = frozenset({"llama"} | ({"qwen3"} if hasattr(transformers, "Qwen3ForCausalLM") else set()))


def dtype_kwargs(dtype: torch.dtype) -> dict:
    """The model dtype as this release's `from_pretrained` takes it."""
    return {DTYPE_KWARG: dtype}


class CountsItemsInBatchSamples:
    """Mixin before a transformers Trainer class of 4.46-4.56, whose `get_batch_samples` computes
    num_items_in_batch inline (later releases call `_get_num_items_in_batch`, read by `CountsItems`)."""

    capture: StepCapture

    def get_batch_samples(self, *args, **kwargs):
        batch_samples, count = super().get_batch_samples(*args, **kwargs)
        if batch_samples and not hasattr(Trainer, "_get_num_items_in_batch"):
            self.capture.counts.append(None if count is None else int(count))
        return batch_samples, count


def read_clip_from_accelerator(trainer, capture: StepCapture) -> None:
    """On a Trainer without `_clip_grad_norm` (4.x, early 5.x): record the gradients and the norm where it clips,
    `accelerator.clip_grad_norm_`, which returns the pre-clip norm. Without clipping 4.x computes no
    norm at all, and the gradients are those `on_pre_optimizer_step` sees (StepCapture.callback)."""
    if CLIPS_IN_HOOK:
        return
    accelerator = trainer.accelerator
    clip = accelerator.clip_grad_norm_

    def recording_clip(parameters, max_norm, *args, **kwargs):
        capture.record_grads(trainer.model)  # before the clip; `parameters` may be the DDP wrapper's
        norm = clip(parameters, max_norm, *args, **kwargs)
        capture.grad_norm = float(norm)
        return norm

    accelerator.clip_grad_norm_ = recording_clip


def per_micro_batch_count(capture: StepCapture) -> int:
    """The token count of a Trainer without num_items_in_batch: each micro-batch's loss divides by its
    own count of shifted labels != -100 (ForCausalLMLoss's mean), and these add up to what it counted."""
    return sum(int((mb.inputs["labels"][:, 1:] != -100).sum()) for mb in capture.micro_batches)
