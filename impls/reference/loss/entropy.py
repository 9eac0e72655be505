"""H[b, p], the entropy of the distribution position p predicts its label from, a chunk of positions at a time where
the logits are large.

The plain formula, -(exp(logp) * logp).sum(-1) with logp = log_softmax(logits) in at least float32, keeps three
[B, T, V] float32 tensors alive for backward: 3 x 9.24 GiB for a 0.6b qwen3 rl_loss_aggregation arm (vocab 151,936),
which put the reference out of memory on an 80 GB H100 (docs/gpu.md, 2026-12-06). Each position's entropy depends on
its own row of logits only, so above CHUNK_ELEMENTS logits it is computed a chunk of positions at a time under
activation checkpointing: nothing of size [B, T, V] but the logits themselves is kept, and backward recomputes one
chunk's softmax at a time. The same operations on the same rows: in float64 the chunked values and gradients equal the
plain ones (tests/test_entropy_chunks.py). From reference.fast's LmHeadInputs each chunk's logits are computed from its
own hidden states, so the full logits are never materialised either. Below CHUNK_ELEMENTS (the suite's tiny cases) the
plain formula runs, as before.

Shapes: B batch, T sequence, N = B*T positions, C hidden_size, V vocab_size.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs

CHUNK_ELEMENTS = 2**28  # logits per chunk: 1 GiB of float32, 1766 positions at vocab 151,936


def prediction_entropy(logits_BTV: torch.Tensor | LmHeadInputs) -> torch.Tensor:
    """H[b, p] (every logit needed: from reference.fast's LmHeadInputs they are computed here, a chunk at a time)."""
    if isinstance(logits_BTV, LmHeadInputs):
        # chunk by chunk the logits a pad-poisoned case overwrites are left as computed: those rows are never in the loss
        hidden_BTC, weight_VC, _ = logits_BTV
        B, T, V = *hidden_BTC.shape[:2], weight_VC.shape[0]
        if B * T * V <= CHUNK_ELEMENTS:
            return row_entropy(logits_BTV.logits())
        return _by_chunks(hidden_BTC.reshape(B * T, -1), V, lambda h_NC: row_entropy(LmHeadInputs(h_NC, weight_VC).logits())).view(B, T)
    B, T, V = logits_BTV.shape
    if logits_BTV.numel() <= CHUNK_ELEMENTS:
        return row_entropy(logits_BTV)
    return _by_chunks(logits_BTV.reshape(B * T, V), V, row_entropy).view(B, T)


def row_entropy(logits_NV: torch.Tensor) -> torch.Tensor:
    """-(p * log p) summed over the last dimension, in at least float32."""
    logp_NV = torch.log_softmax(logits_NV.to(torch.promote_types(logits_NV.dtype, torch.float32)), dim=-1)
    return -(logp_NV.exp() * logp_NV).sum(-1)


def _by_chunks(rows_NX: torch.Tensor, vocab_size: int, entropy) -> torch.Tensor:
    """`entropy` of each chunk of rows, each under checkpointing (its [chunk, V] intermediates recomputed in backward)."""
    positions = max(1, CHUNK_ELEMENTS // vocab_size)
    return torch.cat([checkpoint(entropy, chunk, use_reentrant=False) for chunk in rows_NX.split(positions)])
