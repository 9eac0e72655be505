"""The reference trainer's model: readable PyTorch Llama / Qwen3 with document-causal attention, and
the Qwen2.5-VL vision-language model built on the same decoder layers."""

from packcheck.impls.reference.model.attention import ATTENTION_BACKENDS, AttentionBackend, document_causal_mask, get_attention_backend
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.loading import load_model
from packcheck.impls.reference.model.vlm import VisionLanguageLM

__all__ = ["ATTENTION_BACKENDS", "AttentionBackend", "CausalLM", "ModelConfig", "VisionLanguageLM", "document_causal_mask", "get_attention_backend",
           "load_model"]
