"""The benchmark's arms: trainers that take one optimizer step on step s's data and return its loss.
Every arm starts from the same checkpoint, sees the same rows and minimises the same loss (the token
mean over the step's loss tokens), with AdamW (lr 1e-5; fused on CUDA) on bf16 (or the run's dtype)
parameters.

- reference:        today's reference engine step (train_step.accumulate_gradients with the REFERENCE
                    pipeline): rows built on the host inside the step, eager layers, SDPA with a dense
                    [B, 1, T, T] document-causal mask, full logits.
- reference-flex:   the same with the reference's eager-layer FlexAttention ('flex').
- reference-fast:   reference.fast (impls/reference/fast.py) through the same accumulate_gradients: chunked log-probs,
                    compiled decoder layers with FlexAttention and a block-level BlockMask (CUDA),
                    rows built in a worker process and pinned (prefetch.py).
- reference-fast-varlen: the same with torch's varlen (flash) attention over cu_seqlens
                    (model/varlen_attention.py) instead of FlexAttention (CUDA; on the CPU: SDPA).
- reference-fast-flash: the same with flash-attention's varlen kernel, flash-attn-4's CuTe kernel or else
                    flash-attn 2's (model/flash_attention.py; CUDA; on the CPU: SDPA).
- transformers:     transformers' AutoModelForCausalLM (Qwen3ForCausalLM / LlamaForCausalLM) from the
                    same checkpoint, packed rows passed as per-document position_ids (its masking_utils
                    turns position resets into a packed-sequence mask: find_packed_sequence_indices),
                    attention 'flex_attention' with each decoder layer compiled on CUDA ('sdpa', eager,
                    on the CPU, where flex has no backward); rows from the same worker process.
- transformers-sdpa: transformers eager with 'sdpa' (its dense packed mask).
- transformers-flash: transformers with 'flash_attention_4' (flash_attn.cute's varlen kernel), each decoder
                    layer compiled; its flash path sees packing only in one row, so a forward's rows are laid
                    end to end as one row, with cu_seqlens from the position resets given once per forward
                    (transformers' prepare_fa_kwargs_from_position_ids, its padding-free path). CUDA only.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch

from packcheck.impls.reference.bench.data import BenchData
from packcheck.impls.reference.bench.prefetch import RowPrefetcher
from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.engine import DTYPES
from packcheck.impls.reference.fast import FAST_PIPELINE, make_fast
from packcheck.impls.reference.model import load_model
from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.block_mask import FLEX_BLOCKS
from packcheck.impls.reference.model.flash_attention import flash_backend
from packcheck.impls.reference.model.varlen_attention import varlen_backend
from packcheck.impls.reference.step.pipeline import REFERENCE
from packcheck.impls.reference.step.train_step import accumulate_gradients

LR = 1e-5


@dataclass(frozen=True, kw_only=True, slots=True)
class BenchContext:
    checkpoint: str
    data: BenchData
    dtype: str
    device: str

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


@contextlib.contextmanager
def closing_on_error(prefetch: RowPrefetcher | None):
    """A trainer that fails to build stops its row-building process (run_arm never gets the trainer to close it)."""
    try:
        yield
    except BaseException:
        if prefetch is not None:
            prefetch.close()
        raise


def adamw(model: torch.nn.Module, cuda: bool) -> torch.optim.AdamW:
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, fused=cuda or None)


class ReferenceTrainer:
    def __init__(self, ctx: BenchContext, fast: bool, attention: str | AttentionBackend = "sdpa"):
        self.ctx, self.fast = ctx, fast
        self.prefetch = RowPrefetcher(ctx.data.cases, "reference.fast", pin=ctx.cuda) if fast else None  # starts while the model loads
        with closing_on_error(self.prefetch):
            self.model = load_model(ctx.checkpoint, DTYPES[ctx.dtype], ctx.device)
            self.pipe = FAST_PIPELINE if fast else REFERENCE
            self.attention = attention
            if fast:
                make_fast(self.model, compile_layers=ctx.cuda)
                self.attention = attention if ctx.cuda else "sdpa"
            self.optimizer = adamw(self.model, ctx.cuda)

    def step(self, step: int) -> float:
        rows = None if self.prefetch is None else self.prefetch.next(step)
        loss, _, _ = accumulate_gradients(self.model, self.ctx.data.cases[step], self.pipe, self.attention, micro_batches=rows)
        self.optimizer.step()
        return loss


class TransformersTrainer:
    def __init__(self, ctx: BenchContext, attn_implementation: str, compile_layers: bool, one_row: bool = False):
        """`one_row`: each forward's rows laid end to end as one row, its documents given as flash-attention's cu_seqlens."""
        from transformers import AutoModelForCausalLM

        self.ctx, self.one_row = ctx, one_row
        self.prefetch = RowPrefetcher(ctx.data.cases, "reference", pin=ctx.cuda)  # starts while the model loads
        with closing_on_error(self.prefetch):
            self.model = AutoModelForCausalLM.from_pretrained(ctx.checkpoint, dtype=DTYPES[ctx.dtype],
                                                              attn_implementation=attn_implementation).to(ctx.device)
            self.model.config.use_cache = False
            self.model.train()
            if compile_layers:
                for layer in self.model.model.layers:
                    layer.compile()
            self.optimizer = adamw(self.model, ctx.cuda)

    def step(self, step: int) -> float:
        rows = self.prefetch.next(step)
        global_tokens = self.ctx.data.cases[step].num_loss_tokens
        self.model.zero_grad(set_to_none=True)
        total = 0.0
        for forwards in rows:
            for predictions in forwards:
                p = predictions.to(self.ctx.device)
                input_ids_BT, position_ids_BT, label_BT, label_mask_BT = p.input_ids_BT, p.position_ids_BT, p.label_BT, p.label_mask_BT
                kwargs = {}
                if self.one_row:  # every row starts a document (position 0): the rows' boundaries stay documents' boundaries
                    input_ids_BT, position_ids_BT, label_BT, label_mask_BT = (
                        x.reshape(1, -1) for x in (input_ids_BT, position_ids_BT, label_BT, label_mask_BT))
                    kwargs = flash_kwargs(position_ids_BT)
                logits_BTV = self.model(input_ids=input_ids_BT, position_ids=position_ids_BT, use_cache=False, **kwargs).logits
                lp_BT = label_logprobs(logits_BTV, label_BT)
                loss = -(lp_BT * label_mask_BT.to(lp_BT.dtype)).sum() / global_tokens
                loss.backward()
                total += loss.item()
        self.optimizer.step()
        return total


def flash_kwargs(position_ids_1N: torch.Tensor) -> dict:
    """transformers' FlashAttentionKwargs for one row of documents whose positions restart at 0."""
    from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

    (cu_q, cu_k), (longest_q, longest_k) = prepare_fa_kwargs_from_position_ids(position_ids_1N)
    return {"cu_seq_lens_q": cu_q, "cu_seq_lens_k": cu_k, "max_length_q": int(longest_q), "max_length_k": int(longest_k)}


def transformers_flash(ctx: BenchContext) -> TransformersTrainer:
    if not ctx.cuda:
        raise RuntimeError("transformers-flash runs on CUDA only (flash_attn.cute)")
    return TransformersTrainer(ctx, "flash_attention_4", compile_layers=True, one_row=True)


ARMS: dict[str, Callable[[BenchContext], object]] = {
    "reference": lambda ctx: ReferenceTrainer(ctx, fast=False, attention="sdpa"),
    "reference-flex": lambda ctx: ReferenceTrainer(ctx, fast=False, attention="flex"),
    "reference-fast": lambda ctx: ReferenceTrainer(ctx, fast=True, attention=FLEX_BLOCKS),
    "reference-fast-varlen": lambda ctx: ReferenceTrainer(ctx, fast=True, attention=varlen_backend() if ctx.cuda else "sdpa"),
    "reference-fast-flash": lambda ctx: ReferenceTrainer(ctx, fast=True, attention=flash_backend() if ctx.cuda else "sdpa"),
    "transformers": lambda ctx: TransformersTrainer(ctx, "flex_attention" if ctx.cuda else "sdpa", compile_layers=ctx.cuda),
    "transformers-sdpa": lambda ctx: TransformersTrainer(ctx, "sdpa", compile_layers=False),
    "transformers-flash": transformers_flash,
}
DEFAULT_ARMS = ("reference-fast", "transformers", "reference")  # the comparison that matters first, should a run be cut short
