"""The reference trainer's model: readable PyTorch Llama / Qwen3 with document-causal attention, and the
hybrid Qwen3.5 (GatedDeltaNet + gated attention, hybrid.py) whose linear-attention state resets per document."""

from packcheck.impls.reference.model.attention import ATTENTION_BACKENDS, AttentionBackend, document_causal_mask, get_attention_backend
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.hybrid import HybridCausalLM

__all__ = ["ATTENTION_BACKENDS", "AttentionBackend", "CausalLM", "HybridCausalLM", "ModelConfig", "document_causal_mask", "get_attention_backend"]
