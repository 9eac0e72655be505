"""The model cut into pipeline units and the units into `pp` consecutive stages.

A unit is the smallest piece a stage may hold: the embedding (for a vision-language model the
placeholder merge of the image features with it; the frozen tower itself runs before it, on the
first stage, once per micro-batch: step/vision_step.py), each decoder layer, and the head (the
final norm with the lm_head). Each unit is a thin module around the model's own submodules, so a
stage computes exactly the unsplit model's arithmetic on the same Parameter objects, and the model
files stay untouched: `layer_inputs` mirrors the forwards' prologues (mask, RoPE or MRoPE tables,
the hybrid's row segment ids for its linear attention), built on every stage from the boundaries
the stage was given (the Pipeline's `stage_boundaries`: impls/reference/step/pipeline.py).

Stages are as even as the units allow, the first ones one unit longer: tiny llama's 4 units give
pp2 [embed, layer 0 | layer 1, head], pp3 [embed, layer 0 | layer 1 | head], pp4 one unit each, so
pp 3 and 4 have middle stages that hold decoder layers.

Shapes: B rows, T tokens, C hidden_size, D head_dim (R rotary dims on the hybrid), V vocab_size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from packcheck.impls.reference.model.attention import AttentionBackend, get_attention_backend
from packcheck.impls.reference.model.hybrid import HybridCausalLM
from packcheck.impls.reference.model.linear_attention import get_linear_attention_backend
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs
from packcheck.impls.reference.model.moe import SparseMoeBlock
from packcheck.impls.reference.model.mrope import mrope_cos_sin
from packcheck.impls.reference.model.rope import rope_cos_sin
from packcheck.impls.reference.model.vlm import VisionLanguageLM, merge_image_features


@dataclass(frozen=True, slots=True)
class LayerInputs:
    """What every decoder layer of one forward takes besides its hidden states: all of it read off the boundaries."""

    cos_BTD: torch.Tensor
    sin_BTD: torch.Tensor
    backend: AttentionBackend
    mask: Any
    linear: Any = None  # hybrid only: the linear-attention backend
    row_segment_ids_BT: torch.Tensor | None = None  # hybrid only: the whole row's segments, where its state resets


def text_stack(model: nn.Module) -> nn.Module:
    return model.model.language_model if isinstance(model, VisionLanguageLM) else model.model


def layer_inputs(model: nn.Module, position_ids_BT: torch.Tensor, segment_ids_BT: torch.Tensor, attention) -> LayerInputs:
    """The mask and rotary tables of `model`'s forward for these boundaries (its forward's own prologue)."""
    backend = attention if isinstance(attention, AttentionBackend) else get_attention_backend(attention)
    mask = backend.build_mask(segment_ids_BT)
    dtype = next(model.parameters()).dtype
    if isinstance(model, VisionLanguageLM):
        text = model.config.text
        positions_BT3 = position_ids_BT if position_ids_BT.dim() == 3 else position_ids_BT[..., None].expand(-1, -1, 3)
        cos, sin = mrope_cos_sin(positions_BT3, text.head_dim, text.rope_theta, model.config.mrope_section, dtype)
        return LayerInputs(cos, sin, backend, mask)
    if isinstance(model, HybridCausalLM):
        cos, sin = rope_cos_sin(position_ids_BT, model.config.rotary_dim, model.config.rope_theta, dtype)
        return LayerInputs(cos, sin, backend, mask, get_linear_attention_backend(model.linear_attention),
                           backend.row_shards.gather_ids(segment_ids_BT))
    cos, sin = rope_cos_sin(position_ids_BT, model.config.head_dim, model.config.rope_theta, dtype)
    return LayerInputs(cos, sin, backend, mask)


class EmbeddingUnit(nn.Module):
    """Token ids [B, T] -> x_BTC; a vision-language model's image features replace their placeholders here."""

    def __init__(self, embed_tokens: nn.Embedding):
        super().__init__()
        self.embed_tokens = embed_tokens

    def forward(self, input_ids_BT, inputs: LayerInputs, images=()) -> torch.Tensor:
        x_BTC = self.embed_tokens(input_ids_BT)
        if images:
            features_NC, image_index_BT = images
            x_BTC = merge_image_features(x_BTC, features_NC.to(x_BTC.dtype), image_index_BT)
        return x_BTC


class LayerUnit(nn.Module):
    def __init__(self, layer: nn.Module, hybrid: bool):
        super().__init__()
        self.layer, self.hybrid = layer, hybrid

    def forward(self, x_BTC, inputs: LayerInputs, images=()) -> torch.Tensor:
        if self.hybrid:
            return self.layer(x_BTC, inputs.cos_BTD, inputs.sin_BTD, inputs.backend, inputs.mask, inputs.linear, inputs.row_segment_ids_BT)
        return self.layer(x_BTC, inputs.cos_BTD, inputs.sin_BTD, inputs.backend, inputs.mask)


class HeadUnit(nn.Module):
    """x_BTC -> logits_BTV: the final norm and the lm_head (the embedding's weight where they are tied). Where the model
    asks for them (`lm_head_inputs`: reference.fast, a memory plan's chunked log-probs), the normed hidden states and
    the lm_head weight instead, as its own forward returns them."""

    def __init__(self, norm: nn.Module, lm_head: nn.Linear, wants_lm_head_inputs: Callable[[], bool]):
        super().__init__()
        self.norm, self.lm_head = norm, lm_head
        self.wants_lm_head_inputs = wants_lm_head_inputs

    def forward(self, x_BTC, inputs: LayerInputs, images=()) -> torch.Tensor | LmHeadInputs:
        if self.wants_lm_head_inputs():
            return LmHeadInputs(self.norm(x_BTC), self.lm_head.weight)
        return self.lm_head(self.norm(x_BTC))


def pipeline_units(model: nn.Module) -> list[nn.Module]:
    """`model` as its units, in forward order: embedding, each decoder layer, head."""
    stack = text_stack(model)
    hybrid = isinstance(model, HybridCausalLM)
    head = HeadUnit(stack.norm, model.lm_head, lambda: getattr(model, "lm_head_inputs", False))
    return [EmbeddingUnit(stack.embed_tokens), *(LayerUnit(layer, hybrid) for layer in stack.layers), head]


def stage_bounds(units: int, pp: int) -> list[range]:
    """The units of each of `pp` stages: consecutive, as even as possible, the first stages one longer."""
    assert 1 <= pp <= units, f"pp={pp} stages need at least as many units, the model has {units}"
    size, longer = divmod(units, pp)
    bounds, start = [], 0
    for stage in range(pp):
        end = start + size + (stage < longer)
        bounds.append(range(start, end))
        start = end
    return bounds


class PipelineStage(nn.Module):
    """One stage: its units run in order. The first stage takes token ids, the others the previous stage's x_BTC;
    the last returns logits, the others x_BTC. Its parameters are exactly the units' it owns (what DDP wraps)."""

    def __init__(self, units: list[nn.Module], first: bool, last: bool):
        super().__init__()
        self.units = nn.ModuleList(units)
        self.first, self.last = first, last

    def forward(self, x, inputs: LayerInputs, images=()) -> torch.Tensor:
        for unit in self.units:
            x = unit(x, inputs, images)
        return x


def build_stage(model: nn.Module, pp: int, stage: int) -> PipelineStage:
    units = pipeline_units(model)
    return PipelineStage([units[i] for i in stage_bounds(len(units), pp)[stage]], first=stage == 0, last=stage == pp - 1)


def sparse_layer_indices(model: nn.Module, stage: PipelineStage) -> list[int]:
    """Which of the model's sparse (MoE) layers, counted among the sparse layers only, this stage holds, in order."""
    layers = list(text_stack(model).layers)
    sparse = [layer for layer in layers if isinstance(layer.mlp, SparseMoeBlock)]
    held = {id(unit.layer) for unit in stage.units if isinstance(unit, LayerUnit)}
    return [i for i, layer in enumerate(sparse) if id(layer) in held]
