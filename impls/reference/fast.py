"""reference.fast: the reference trainer's fast path, an engine variant the suite checks against the
exact reference (issue 17 item 4). Same pipeline, same step (step/train_step.py), other kernels:

- log-probs a chunk of tokens at a time from the final hidden states and the lm_head weight
  (loss/chunked_logprobs.py): the full [B, T, V] logits never exist. On every device; on the CPU in
  float64 this is what `packcheck run --engine reference.fast` checks against the exact path.
- on CUDA, one process per row (cp == 1): each decoder layer and the final norm compiled
  (torch.compile per layer: RMSNorm, RoPE, SwiGLU and the attention fused), and, for attention
  'auto' or 'flex', FlexAttention with a block-level document-causal BlockMask built once per
  forward from the segment ids on the GPU (model/block_mask.py).

A policy loss with an entropy bonus still needs every logit: there they are computed a chunk at a time
(entropy.prediction_entropy), correct but not fast.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.loss.chunked_logprobs import chunked_label_logprobs
from packcheck.impls.reference.model.attention import AttentionBackend
from packcheck.impls.reference.model.block_mask import FLEX_BLOCKS
from packcheck.impls.reference.step.pipeline import REFERENCE

FAST_PIPELINE = replace(REFERENCE, label_logprobs=chunked_label_logprobs)


def make_fast(model: torch.nn.Module, compile_layers: bool) -> torch.nn.Module:
    """The model returns LmHeadInputs for the chunked log-prob; with `compile_layers` (CUDA) each decoder layer
    and the final norm run compiled (one compiled graph shared by every layer: same code, parameters as inputs)."""
    model.lm_head_inputs = True
    if compile_layers:
        for layer in model.model.layers:
            layer.compile()
        model.model.norm.compile()
    return model


class ReferenceFast(ReferenceEngine):
    name = "reference.fast"
    # no capture: its layers run compiled on a GPU, where module hooks would break the graphs it is measured by
    capabilities = replace(ReferenceEngine.capabilities, families=frozenset({"llama", "qwen3", "qwen3_moe"}), images=False,
                           activations=False)
    pipeline = FAST_PIPELINE

    @staticmethod
    def compiles(case: Case) -> bool:
        return case.device == "cuda" and case.parallel.cp == 1

    def attention_backend(self, case: Case) -> str | AttentionBackend:
        if self.compiles(case) and case.attention in ("auto", "flex"):
            return FLEX_BLOCKS
        return super().attention_backend(case)

    def prepare_model(self, model: torch.nn.Module, case: Case) -> None:
        make_fast(model, compile_layers=self.compiles(case))
