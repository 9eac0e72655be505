"""torchtitan (0.3.0): one real `Trainer.train_step` on CUDA behind packcheck's Engine.

One `run` is one torchtitan optimizer step: the llama3 model built from the Case's checkpoint
through torchtitan's state-dict adapter (model.py), a data iterator yielding the Case's
micro-batches with positions (batch.py), and torchtitan's own `train_step` (trainer.py), which
counts the valid tokens of every micro-batch first, then runs forward (flex attention under the
document mask it builds from positions) and backward per micro-batch with its sum cross-entropy
divided by that count, clips and steps AdamW. The adapter reads back, without changing the step:
the logits of each micro-batch (a forward hook) for the per-token log-probs, the gradients just
before torchtitan's `clip_grad_norm_` (a wrapper that calls it), the loss and grad norm
`train_step` logs, and the parameters after the step.

CUDA only: torchtitan's flex attention has no backward on the CPU (NotImplementedError) and its
varlen backend needs `aten::_flash_attention_forward` (CUDA); SDPA is refused for language
models. float32 and bfloat16 (torchtitan's `training.dtype`: the model is built in that dtype).
On torch 2.11 (the GPU machines' torch), which lacks two names torchtitan 0.3.0 uses outside what
is under test, compat.py bridges them before torchtitan is imported. torchtitan's flex attention is
compiled without its per-shape autotuning (flex_compile.py says why). One process (dp=1, cp=1): data
and context parallel arms are declined, and arms the harness moves to the CPU (docs/gpu.md) are
declined with the CPU reason.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.distributed as dist

from packcheck.harness.contract import Case, LayoutKind, StepResult
from packcheck.harness.engines import Capabilities, Engine, device_missing
from packcheck.impls.adapters.torchtitan import batch as batches
from packcheck.impls.adapters.torchtitan import compat
from packcheck.impls.adapters.torchtitan.flex_compile import compile_flex_without_autotuning
from packcheck.impls.adapters.torchtitan.model import build_model, hf_name, to_hf
from packcheck.impls.adapters.torchtitan.trainer import CountingLoss, LoggedStep, make_trainer

LAYOUTS = frozenset({LayoutKind.PACKED, LayoutKind.UNPACKED})
CPU_REASON = ("torchtitan runs on CUDA only: its flex attention has no backward on the CPU (NotImplementedError), "
              "its varlen backend needs aten::_flash_attention_forward (CUDA) and SDPA is refused for language models; "
              "run with --device cuda on a GPU machine")


def ensure_process_group() -> None:
    """torchtitan's SPMD context builds a device mesh: a single-process run gets a world of one."""
    if not dist.is_initialized():
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)


@contextmanager
def gradients_before_clipping(model, into: dict):
    """Copy every gradient as train_step hands it to torchtitan's clip_grad_norm_, then let it clip."""
    from torchtitan.distributed import utils as dist_utils

    original = dist_utils.clip_grad_norm_

    def copying(*args, **kwargs):
        into.update({name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None})
        return original(*args, **kwargs)

    dist_utils.clip_grad_norm_ = copying
    try:
        yield
    finally:
        dist_utils.clip_grad_norm_ = original


def logprobs_hook(into: list):
    """Forward hook: each micro-batch's log-softmax of the logits, as torchtitan's loss sees them (float32)."""
    def hook(module, args, output):
        into.append(torch.log_softmax(output.detach().float(), dim=-1).cpu())
    return hook


class Torchtitan(Engine):
    name = "torchtitan"
    loss_class = CountingLoss  # torchtitan's loss as train_step calls it (variants.py changes what it divides by)
    capabilities = Capabilities(
        families=frozenset({"llama"}),
        layouts=LAYOUTS,
        dtypes=frozenset({"float32", "bfloat16"}),
        devices=frozenset({"cuda"}),
        reports=frozenset({"params_after", "grad_norm"}),
        attention={"auto": LAYOUTS, "flex": LAYOUTS},
    )

    def unsupported_reason(self, case: Case) -> str | None:
        if case.device == "cpu":
            return CPU_REASON
        reason = super().unsupported_reason(case)
        if reason is not None:
            return reason
        if missing := device_missing(case.device):
            return f"{missing}: {CPU_REASON}"
        return None

    def micro_batches(self, case: Case) -> tuple[list[batches.MicroBatch], list[batches.Span]]:
        return batches.micro_batches(case)

    def run(self, case: Case) -> StepResult:
        self.require_supported(case)
        compat.bridge_torch()
        autotuned = not compile_flex_without_autotuning()
        ensure_process_group()
        device = torch.device("cuda", torch.cuda.current_device())
        model, config = build_model(case.model.checkpoint, case.dtype, device)
        for name, parameter in model.named_parameters():  # the Case names frozen parameters the Hugging Face way
            parameter.requires_grad_(not case.model.is_frozen(hf_name(config, name, parameter)))
        data, spans = self.micro_batches(case)
        logged, grads, logprobs = LoggedStep(), {}, []
        trainer = make_trainer(case, model, config, device, len(data), logged, self.loss_class)
        iterator = iter([({"input": mb.inputs_RT, "positions": mb.positions_RT}, mb.labels_RT) for mb in data])
        handle = model.register_forward_hook(logprobs_hook(logprobs))
        try:
            with gradients_before_clipping(model, grads):
                trainer.train_step(iterator)
        finally:
            handle.remove()
        counts = set(logged.valid_tokens)
        if len(counts) != 1:
            raise RuntimeError(f"torchtitan passed different global_valid_tokens to its micro-batches: {logged.valid_tokens}")
        return StepResult(
            logprobs=batches.sample_logprobs(case, spans, logprobs),
            loss=logged.loss,
            num_loss_tokens=counts.pop(),
            grads=to_hf(config, grads),
            params_after=to_hf(config, dict(model.named_parameters())) if case.optimizer is not None else None,
            grad_norm=logged.grad_norm if case.optimizer is not None else None,
            notes={"torchtitan": torchtitan_version(), "micro_batches": len(data), "torch": torch.__version__,
                   "flex_autotune": autotuned},
        )


def torchtitan_version() -> str:
    from importlib.metadata import version

    return version("torchtitan")
