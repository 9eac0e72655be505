"""The captured step as a StepResult: per-sample log-probs and loss weights, count, loss, grads.

`dloss_dlogprobs` comes from the gradient the trainer's own backward sent into its output:
- TRL's fused head outputs `log_probs` (zeroed by masked_fill off its `label_mask`), so d loss /
  d log_probs is read directly, on the positions of the mask;
- the HF model outputs logits. For a loss that depends on each position only through the log-prob
  of its label, d loss / d logits = w (onehot(label) - softmax), so w = g[label] / (1 - p[label]).
  That premise is checked on every position (`weight_residual`): a loss with any other dependence
  on the logits (label smoothing, z-loss) fails the run instead of being misread.

A MoE model adds router_aux_loss_coef x its own aux_loss to every micro-batch's loss, so the
trainer's training loss holds them: the contract's `loss` is the loss spec's, so their sum
(x coef) is taken back out of it and reported as `aux_loss`, with the summed router counts.
"""

from __future__ import annotations

import torch

from packcheck.harness.contract import Case, StepResult
from packcheck.impls.adapters.hf_common.capture import MicroBatch, StepCapture
from packcheck.impls.adapters.hf_common.rows import TranslationError, sample_values, spans

# how far the engine's own output may sit from log_softmax(lm_head(hidden)) and from the
# premise of the weight read-out, relative to 1 nat / max |weight|
AGREEMENT = {torch.float64: 1e-6, torch.float32: 1e-4}


def _next_token_values(mb: MicroBatch) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Per row position p < T-1: log p(token p+1) from the training forward, and the loss weight
    d loss / d log p(token p+1) from the trainer's backward (0 where no gradient flowed)."""
    ids_RT = mb.inputs["input_ids"]
    next_RT = ids_RT[:, 1:]
    logprob_RT = mb.logprobs_RV[:, :-1].gather(-1, next_RT.unsqueeze(-1)).squeeze(-1)
    labels_RT = mb.inputs["labels"][:, 1:]
    supervised = labels_RT != -100
    if not torch.equal(labels_RT[supervised], next_RT[supervised]):
        raise TranslationError("a label differs from the next input token: the engine trains on tokens the Case does not hold")
    tolerance = AGREEMENT[mb.logprobs_RV.dtype]
    if mb.engine_output.dim() == 3:  # logits
        disagreement = (torch.log_softmax(mb.engine_output, -1) - mb.logprobs_RV).abs().max().item()
        grad = mb.engine_grad
        if grad is None or grad.shape[1] < 2:
            weight_RT = torch.zeros_like(logprob_RT)
        else:
            grad_RV = grad[:, :-1]
            probs_RV = mb.logprobs_RV[:, :-1].exp()
            g_target = grad_RV.gather(-1, next_RT.unsqueeze(-1)).squeeze(-1)
            p_target = probs_RV.gather(-1, next_RT.unsqueeze(-1)).squeeze(-1)
            weight_RT = g_target / (1 - p_target)
            onehot = torch.nn.functional.one_hot(next_RT, probs_RV.shape[-1]).to(probs_RV.dtype)
            residual = (grad_RV - weight_RT.unsqueeze(-1) * (onehot - probs_RV)).abs().max()
            scale = weight_RT.abs().max().clamp(min=torch.finfo(weight_RT.dtype).tiny)
            if residual / scale > tolerance or grad[:, -1].abs().max() > 0:
                raise TranslationError(f"the engine's loss gradient is not of the form w (onehot(next token) - softmax) "
                                       f"(residual {residual / scale:.2e}): per-token weights cannot be read from it")
    else:  # log-probs of the next token, zero off the labels
        width = mb.engine_output.shape[1]
        disagreement = (mb.engine_output - logprob_RT[:, :width]).abs()[supervised[:, :width]].max().item() if supervised.any() else 0.0
        # the head zeroes the masked positions with masked_fill, which passes no gradient through them
        weight_RT = torch.zeros_like(logprob_RT) if mb.engine_grad is None else (mb.engine_grad * mb.engine_mask).to(logprob_RT.dtype)
    if disagreement > tolerance:
        raise TranslationError(f"log_softmax(lm_head(hidden)) differs from the engine's own output by {disagreement:.2e}: "
                               "the captured forward is not the one the trainer trained on")
    return logprob_RT, weight_RT, disagreement


def step_result(case: Case, capture: StepCapture, loss: float, partition: tuple[tuple[int, ...], ...],
                num_loss_tokens: int, with_weights: bool) -> StepResult:
    if len(capture.micro_batches) != len(partition):
        raise TranslationError(f"the trainer ran {len(capture.micro_batches)} training forwards, the Case has {len(partition)} micro-batches")
    logprobs: list[torch.Tensor | None] = [None] * len(case.samples)
    weights: list[torch.Tensor | None] = [None] * len(case.samples)
    worst = 0.0
    for mb, sample_ids in zip(capture.micro_batches, partition):
        logprob_RT, weight_RT, disagreement = _next_token_values(mb)
        worst = max(worst, disagreement)
        for span in spans(mb.inputs, sample_ids, case.samples):
            n = len(case.samples[span.sample].input_ids)
            logprobs[span.sample] = sample_values(logprob_RT, span, n)
            logprobs[span.sample][0] = 0.0  # nothing of this sample precedes token 0
            weights[span.sample] = sample_values(weight_RT, span, n)
    aux = [mb.aux_loss for mb in capture.micro_batches]
    moe = all(a is not None for a in aux) and bool(aux)
    return StepResult(
        logprobs=logprobs,
        loss=float(loss) - capture.aux_coef * sum(aux) if moe else float(loss),
        num_loss_tokens=num_loss_tokens,
        grads=capture.grads,
        dloss_dlogprobs=weights if with_weights else None,
        params_after=capture.params_after if case.optimizer is not None else None,
        grad_norm=capture.grad_norm if case.optimizer is not None else None,
        notes={"engine_output_vs_captured_logprobs": worst},
        aux_loss=sum(aux) if moe else None,
        router_tokens_per_expert=sum(mb.router_tokens_LE for mb in capture.micro_batches) if moe else None,
    )
