"""The reference trainer's model: readable PyTorch Llama / Qwen3 with document-causal attention, the
hybrid Qwen3.5 (GatedDeltaNet + gated attention, hybrid.py) whose linear-attention state resets per document,
and the Qwen2.5-VL vision-language model built on the dense decoder layers (vlm.py)."""

from packcheck.impls.reference.model.attention import ATTENTION_BACKENDS, AttentionBackend, document_causal_mask, get_attention_backend
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.hybrid import HybridCausalLM
from packcheck.impls.reference.model.loading import load_model
from packcheck.impls.reference.model.vlm import VisionLanguageLM

__all__ = ["ATTENTION_BACKENDS", "AttentionBackend", "CausalLM", "HybridCausalLM", "ModelConfig", "VisionLanguageLM",
           "document_causal_mask", "get_attention_backend", "load_model"]
