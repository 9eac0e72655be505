"""Tensor parallelism of the reference model, Megatron-LM's layout, over the mesh's "tp" group.

Each decoder layer's attention is split by heads: q/k/v column-parallel (rank r holds query heads
[r H/tp, (r+1) H/tp) and kv heads [r K/tp, (r+1) K/tp), their biases with them), o_proj row-parallel; the
SwiGLU MLP's gate/up column-parallel, down row-parallel. `copy_to_tp_region` sits in front of each split block
and `reduce_from_tp_region` after it (parallel/tp_regions.py), so outside the blocks every rank holds the same
activations. The lm_head is vocab-parallel (rank r holds vocabulary rows [r V/tp, (r+1) V/tp)); its logits go to
the vocab-parallel log-probs (parallel/vocab_parallel.py). Replicated: the embedding, every RMSNorm, qk-norm
weights (their gradients, partial per head slice, are summed over the group as computed), a MoE block whole (router
and experts: it runs on the replicated activations, so its gradients and its load-balancing loss are every rank's
whole), the vision tower of a vision-language model, and a hybrid family's (qwen3_5) GatedDeltaNet and gated
full-attention layers (not split: only its MLPs and lm_head are; their key/value/gate heads could be split like
SelfAttention's).

Parameters keep their checkpoint names: each split one is replaced by its slice after loading and carries the
dimension it is split along (SPLIT_DIM, copied onto its gradient); `whole` all-gathers such a tensor (a gradient, a
parameter after the step) over the group, and `is_split` tells the gradient norm which gradients are slices
(optim/grad_clip.py: their squares are summed over the group, a replicated gradient's counted once).

Shapes: H query heads, K kv heads, V vocab_size.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from packcheck.harness.contract import Case
from packcheck.impls.reference.model.layers import SelfAttention, SwiGLU
from packcheck.impls.reference.parallel.comm import all_gather_no_grad
from packcheck.impls.reference.parallel.mesh import Mesh
from packcheck.impls.reference.parallel.tp_regions import copy_to_tp_region, reduce_from_tp_region, sum_grad_over_tp

SPLIT_DIM = "tp_split_dim"  # on a split parameter (and on its gradient): the dimension its slices are cut along
COLUMN, ROW = 0, 1  # nn.Linear's weight [out, in]: column-parallel cuts the outputs, row-parallel the inputs


def tensor_parallel_unsupported(case: Case, exact_label_logprobs: bool) -> str | None:
    """Why the reference cannot run `case` tensor-parallel, or None. `exact_label_logprobs`: the pipeline's log-prob
    step is the reference's plain one (the vocab-parallel one replaces it; a chunked or other kernel is not split)."""
    tp = case.parallel.tp
    config = json.loads((Path(case.model.checkpoint) / "config.json").read_text())
    text = config.get("text_config", config)  # a VLM's decoder config is nested
    heads, kv_heads, vocab = text["num_attention_heads"], text.get("num_key_value_heads", text["num_attention_heads"]), text["vocab_size"]
    if heads % tp or kv_heads % tp:
        return f"tensor parallel splits the {heads} query heads and {kv_heads} kv heads over tp={tp} ranks: tp must divide both"
    if vocab % tp:
        return f"the vocab-parallel lm_head splits the {vocab} vocabulary rows over tp={tp} ranks: tp must divide the vocabulary size"
    if text.get("tie_word_embeddings"):
        return "tensor parallel with tied embeddings: the reference keeps the embedding whole and splits the lm_head; untie them"
    if case.parallel.cp > 1:
        return "tensor x context parallel (parallel.tp > 1 with parallel.cp > 1) is not built in the reference: run one of them"
    if case.parallel.dp_style == "shard":
        return "tensor parallel under FSDP2 (dp_style 'shard') is not built in the reference: use dp_style 'replicate' (DDP)"
    if case.pad_poison is not None:
        return "pad poisoning overwrites whole rows of logits; under tensor parallel each rank holds a vocabulary slice: run tp=1"
    if case.loss.is_policy and "entropy" in case.loss.terms:
        return "the entropy bonus needs every logit; the reference's vocab-parallel path has the label log-probs only: run tp=1"
    if not exact_label_logprobs:
        return "this engine's label_logprobs step is not the reference's plain one, and only that one is vocab-parallel here: run tp=1"
    return None


def split_for_tensor_parallel(model: nn.Module, mesh: Mesh) -> nn.Module:
    """Replace the split parameters of a loaded model by this rank's slices and put the region ops around them."""
    group = mesh.group("tp")
    for module in model.modules():
        if isinstance(module, SelfAttention):
            for projection in (module.q_proj, module.k_proj, module.v_proj):
                _keep_slice(projection, COLUMN, mesh)
            _keep_slice(module.o_proj, ROW, mesh)
            module.n_heads //= mesh.tp
            module.n_kv_heads //= mesh.tp
            if module.qk_norm:
                sum_grad_over_tp(module.q_norm.weight, group)
                sum_grad_over_tp(module.k_norm.weight, group)
        elif isinstance(module, SwiGLU):
            _keep_slice(module.gate_proj, COLUMN, mesh)
            _keep_slice(module.up_proj, COLUMN, mesh)
            _keep_slice(module.down_proj, ROW, mesh)
        else:
            continue
        module.register_forward_pre_hook(lambda _m, args: (copy_to_tp_region(args[0], group), *args[1:]))
        module.register_forward_hook(lambda _m, _args, out: reduce_from_tp_region(out, group))
    _keep_slice(model.lm_head, COLUMN, mesh)
    model.lm_head.register_forward_pre_hook(lambda _m, args: (copy_to_tp_region(args[0], group), *args[1:]))
    return model


def _keep_slice(linear: nn.Linear, dim: int, mesh: Mesh) -> None:
    for name in ("weight", "bias"):
        whole_tensor = getattr(linear, name)
        if whole_tensor is None:
            continue
        if name == "bias" and dim == ROW:  # a row-parallel bias would be added tp times by the reduction
            raise ValueError("a row-parallel layer's bias must be added after the reduction; the reference's have none")
        split_dim = dim if name == "weight" else 0
        part = nn.Parameter(whole_tensor.detach().chunk(mesh.tp, dim=split_dim)[mesh.tp_rank].clone())
        setattr(part, SPLIT_DIM, split_dim)
        # the gradient norm reads the mark off the gradient (optim/grad_clip.py), which the pipeline hands it alone
        part.register_post_accumulate_grad_hook(lambda p: setattr(p.grad, SPLIT_DIM, getattr(p, SPLIT_DIM)))
        setattr(linear, name, part)


def whole(parameter: torch.Tensor, tensor: torch.Tensor, mesh: Mesh) -> torch.Tensor:
    """`tensor` (the parameter or its gradient) whole: all-gathered over the TP group where the parameter is split."""
    dim = getattr(parameter, SPLIT_DIM, None)
    return tensor if dim is None else all_gather_no_grad(tensor.detach(), mesh.group("tp"), dim)


def is_split(tensor: torch.Tensor) -> bool:
    return getattr(tensor, SPLIT_DIM, None) is not None
