"""Read what the trainer computed, without touching its numerics.

- forward hooks on the model and on its backbone record, per micro-batch, the inputs exactly as the
  trainer fed them (after its collator), the backbone's last hidden state, and the engine's own
  output (HF: `logits`; TRL's fused head: `log_probs` of the label positions);
- a gradient hook on that output records d loss / d output as the trainer's own backward produced it;
- `_get_num_items_in_batch` (wrapped by the trainer mixin) records the token count the trainer
  divides by;
- for a MoE model, the micro-batch's own `aux_loss` and its router counts (hf_common/router.py);
- every gradient as the accumulated backward left it: copied by `_clip_grad_norm` (wrapped by the
  trainer mixin `RecordsGradNorm`) before the trainer clips, or, when it does not clip, by a
  TrainerCallback in `on_pre_optimizer_step`; the pre-clip global norm the trainer computed
  (`_get_grad_norm`); every parameter in `on_optimizer_step`.

The per-token log-probs of every position are `log_softmax(lm_head(hidden))` of the very hidden
states the training forward produced, computed in the hook before any parameter changes; they are
checked against the engine's own output (`engine_agreement`), so they are what the trainer trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback

from packcheck.impls.adapters.hf_common.router import router_tokens_per_expert


@dataclass
class MicroBatch:
    inputs: dict[str, torch.Tensor]  # input_ids, labels, position_ids / attention_mask, as the model got them
    logprobs_RV: torch.Tensor  # [rows, seq, vocab] log_softmax of the training forward's logits (detached)
    engine_output: torch.Tensor  # the engine's differentiable output: logits [B,T,V] (HF) or log_probs [B,T-1] (TRL)
    engine_grad: torch.Tensor | None = None  # d loss / d engine_output from the trainer's own backward
    engine_mask: torch.Tensor | None = None  # TRL: the positions whose log-prob the fused head kept (masked_fill cuts the rest)
    aux_loss: float | None = None  # MoE: this forward's own load-balancing loss, as the model added it to its loss
    router_tokens_LE: torch.Tensor | None = None  # MoE: this forward's top-k assignments of real tokens per expert


@dataclass
class StepCapture:
    micro_batches: list[MicroBatch] = field(default_factory=list)
    counts: list[int | None] = field(default_factory=list)  # the trainer's num_items_in_batch per optimizer step
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    params_after: dict[str, torch.Tensor] = field(default_factory=dict)
    grad_norm: float | None = None  # the trainer's own pre-clip global gradient norm
    aux_coef: float = 0.0  # MoE: router_aux_loss_coef, what the model multiplies each aux_loss by in its loss
    _hidden: torch.Tensor | None = None

    def attach(self, model: torch.nn.Module) -> list:
        """Register the hooks on `model` (a *ForCausalLM); returns the handles."""
        backbone = model.get_decoder()
        lm_head = model.get_output_embeddings()

        def on_backbone(module, args, kwargs, output):
            self._hidden = output[0] if isinstance(output, tuple) else output.last_hidden_state

        def on_model(module, args, kwargs, output):
            if not module.training:
                return
            with torch.no_grad():
                logprobs = torch.log_softmax(lm_head(self._hidden.detach()), dim=-1)
            engine_output = output.logits if getattr(output, "logits", None) is not None else output.log_probs
            record = MicroBatch(
                inputs={k: v.detach().clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.dim() >= 2},
                logprobs_RV=logprobs, engine_output=engine_output.detach().clone(),
                engine_mask=getattr(output, "label_mask", None))
            if getattr(output, "aux_loss", None) is not None:
                self.aux_coef = float(module.config.router_aux_loss_coef)
                record.aux_loss = float(output.aux_loss)
                record.router_tokens_LE = router_tokens_per_expert(output.router_logits, kwargs.get("attention_mask"),
                                                                   module.config.num_experts_per_tok)
            self.micro_batches.append(record)
            if engine_output.requires_grad:
                engine_output.register_hook(lambda grad: setattr(record, "engine_grad", grad.detach().clone()))

        return [backbone.register_forward_hook(on_backbone, with_kwargs=True),
                model.register_forward_hook(on_model, with_kwargs=True)]

    def record_grads(self, model: torch.nn.Module) -> None:
        self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    def callback(self) -> TrainerCallback:
        capture = self

        class Capture(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                if not capture.grads:  # not clipped: nothing recorded them before
                    capture.record_grads(kwargs["model"])

            def on_optimizer_step(self, args, state, control, **kwargs):
                capture.params_after = {n: p.detach().clone() for n, p in kwargs["model"].named_parameters()}

        return Capture()


class CountsItems:
    """Mixin before a transformers Trainer class: records the `num_items_in_batch` the trainer computed."""

    capture: StepCapture

    def _get_num_items_in_batch(self, batch_samples, device):
        count = super()._get_num_items_in_batch(batch_samples, device)
        if batch_samples:
            self.capture.counts.append(None if count is None else int(count))
        return count


class RecordsGradNorm:
    """Mixin before a transformers Trainer class: records the gradients before the trainer clips them,
    and the pre-clip global norm it computed (clipping or not)."""

    capture: StepCapture

    def _clip_grad_norm(self, model):
        self.capture.record_grads(self.model)  # `model` may be the launcher's DDP wrapper, its names prefixed 'module.'
        return super()._clip_grad_norm(model)

    def _get_grad_norm(self, model, grad_norm=None):
        norm = super()._get_grad_norm(model, grad_norm=grad_norm)
        self.capture.grad_norm = float(norm)
        return norm
