"""The reference's pad poisoning (Case.pad_poison): the harness's values (harness/engines/pad_poison.py) written where
the reference computes them, at the positions of its own rows that hold no token of any sample.

`poisoned_pads` hooks every forward run inside it (a layer recomputed in backward too): the embeddings' output and
every router's logits get the finite garbage (the router then routes the overwritten logits, and `record_routing`
sees those, since this hook runs first).
`poisoned_logits` overwrites the logits the forward returned (NaN / +Inf at pads, the canary's row), or hands the
overwrite to the chunked log-prob (loss/chunked_logprobs.py) where the logits never exist whole.

Shapes: B batch, T sequence, N = B*T positions, V vocab_size.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

from packcheck.harness.engines.pad_poison import PadPoisoner
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs
from packcheck.impls.reference.model.moe import TopKRouter
from packcheck.impls.reference.model.poisoned_rows import PoisonedRows


@contextlib.contextmanager
def poisoned_pads(model: nn.Module, poisoner: PadPoisoner | None, sample_BT: torch.Tensor) -> Iterator[None]:
    """The forwards run inside write the finite poison into the embeddings' output and every router's logits at the
    pads of `sample_BT` (-1: padding); nothing without a poisoner."""
    if poisoner is None:
        yield
        return
    sample_N = sample_BT.reshape(-1)

    def embedded(_module, _args, x_BTC):
        return poisoner.hidden(x_BTC, sample_BT)

    def routed(router, _args, out):
        return router.route(poisoner.router_logits(out[0], sample_N))

    embeddings = [m for name, m in model.named_modules() if name.endswith("embed_tokens")]
    handles = [m.register_forward_hook(embedded, prepend=True) for m in embeddings]
    handles += [m.register_forward_hook(routed, prepend=True) for m in model.modules() if isinstance(m, TopKRouter)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def poisoned_logits(out: torch.Tensor | LmHeadInputs, poisoner: PadPoisoner | None, sample_BT: torch.Tensor,
                    token_BT: torch.Tensor) -> torch.Tensor | LmHeadInputs:
    """The forward's logits [B, T, V] overwritten at the pads and the canary, or its LmHeadInputs carrying the overwrite."""
    if poisoner is None:
        return out
    if isinstance(out, LmHeadInputs):
        return out._replace(overwrite=PoisonedRows(poisoner, sample_BT.reshape(-1), token_BT.reshape(-1)))
    return poisoner.logits(out, sample_BT, token_BT)
