"""The three runs of a check, each one forward and backward without an optimizer step:

- **packed**: the engine's own step (`step(model, batch)`, default `model(**batch)`) on the real batch as it is;
- **per document**: the same model on each document alone, unpadded, positions from 0, the loss summed over the
  document's targets and divided by the batch's normaliser: what the packed step must equal;
- **oracle**: that per-document run on a copy of the model in a higher precision (float32 for a half-precision model,
  float64 for a float32 one), whose distance from the per-document run sets the tolerance (harness/compare/same_precision.py).
  A float64 model is its own oracle.

Each gives its loss, its per-token log-probs in document order, the targets it counted and every parameter's gradient.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from packcheck.guard.batch import IGNORE, Document, one_document, packed_target_count, target_count, targets

Step = Callable[[nn.Module, Mapping[str, object]], object]  # the engine's packed step: a loss, or an output with .loss


def model_step(model: nn.Module, batch: Mapping[str, object]) -> object:
    """The default step: the model's own forward and loss (a transformers causal LM given labels)."""
    return model(**batch)


@dataclass(frozen=True, slots=True)
class StepNumbers:
    loss: torch.Tensor  # float64 scalar, on the CPU
    logprobs: torch.Tensor | None  # each target's log-prob in document order (None: the step returned no logits)
    counted: int  # the targets the loss counts
    grads: dict[str, torch.Tensor]  # by parameter name, as the backward left them


def packed_run(model: nn.Module, batch: Mapping[str, object], step: Step, documents: tuple[Document, ...]) -> StepNumbers:
    out = step(model, batch)
    loss = out if isinstance(out, torch.Tensor) else getattr(out, "loss", None)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise TypeError("the step returned no scalar loss: it must return the loss, or an output with .loss (a transformers "
                        "model called with labels)")
    logits = getattr(out, "logits", None)
    loss.backward()
    logprobs = None
    if isinstance(logits, torch.Tensor):
        with torch.no_grad():
            logprobs = torch.cat([_logprobs(logits[d.row, d.start:d.end], targets(batch["labels"], d)) for d in documents])
    return StepNumbers(loss=loss.detach().double().cpu(), logprobs=logprobs, counted=packed_target_count(batch), grads=_taken(model))


def per_document_run(model: nn.Module, batch: Mapping[str, object], documents: tuple[Document, ...], normaliser: float,
                     before: Callable[[int, Document], None] | None = None) -> StepNumbers:
    """`before(i, document)`: called before each document's forward (the capture places its tokens)."""
    total, logprobs = torch.zeros((), dtype=torch.float64), []
    for i, document in enumerate(documents):
        wanted = targets(batch["labels"], document).to(next(model.parameters()).device)
        if before is not None:
            before(i, document)
        logits = model(**one_document(batch, document), use_cache=False).logits[0]
        lp = _logprobs(logits, wanted, keep_graph=True)
        nll = -lp.sum()
        if lp.numel():
            (nll / normaliser).backward()
        total += nll.detach().double().cpu()
        logprobs.append(lp.detach())
    found = torch.cat(logprobs) if logprobs else torch.zeros(0)
    return StepNumbers(loss=total / normaliser, logprobs=found, counted=target_count(batch["labels"], documents), grads=_taken(model))


def oracle_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32


HOOKS = ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks",
         "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks")


def oracle_model(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A copy of the model in the oracle's dtype, with the attention every dtype runs (per document needs no varlen kernel).
    Copied without the modules' hooks: a hook holds whatever it closes over (a trainer, an optimizer's state), which a
    deep copy would copy too, and the oracle's math needs none of them."""
    saved = {id(m): {name: getattr(m, name) for name in HOOKS if hasattr(m, name)} for m in model.modules()}
    try:
        for m in model.modules():
            for name, hooks in saved[id(m)].items():
                setattr(m, name, type(hooks)())
        twin = copy.deepcopy(model).to(dtype)
    finally:
        for m in model.modules():
            for name, hooks in saved[id(m)].items():
                setattr(m, name, hooks)
    for module in twin.modules():
        # a forward set on the instance (accelerate's output-to-float32 wrapper, a compile wrapper) is bound to the
        # original module: the copy would run the original's weights. The class's forward is the model's own math.
        module.__dict__.pop("forward", None)
    for p in twin.parameters():
        p.grad = None
    setter = getattr(twin, "set_attn_implementation", None)
    if callable(setter) and getattr(getattr(twin, "config", None), "_attn_implementation", "sdpa") not in ("sdpa", "eager"):
        setter("sdpa")
    return twin


def _logprobs(logits: torch.Tensor, wanted: torch.Tensor, keep_graph: bool = False) -> torch.Tensor:
    """The log-prob of each target that is not IGNORE: position t's logits scored at target t (the targets are the labels
    one to the right). Upcast to float32 at least, as transformers' loss does."""
    keep = wanted != IGNORE
    scores = logits[:-1][keep].to(torch.promote_types(logits.dtype, torch.float32))
    lp = torch.log_softmax(scores, dim=-1).gather(-1, wanted[keep].long()[:, None])[:, 0]
    return lp if keep_graph else lp.detach()


def _taken(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter's gradient, taken off the model (each .grad left None for the next run)."""
    grads = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            grads[name] = p.grad
            p.grad = None
    return grads
