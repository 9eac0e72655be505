"""The reference trainer's model: readable PyTorch Llama / Qwen3 with document-causal attention."""

from packcheck.impls.reference.model.attention import ATTENTION_BACKENDS, AttentionBackend, document_causal_mask, get_attention_backend
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig

__all__ = ["ATTENTION_BACKENDS", "AttentionBackend", "CausalLM", "ModelConfig", "document_causal_mask", "get_attention_backend"]
