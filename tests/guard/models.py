"""Tiny transformers models for the guard's tests: a real Llama from a config (random weights, seeded), and the same
model with one packing bug seeded in (a mutant): a port whose forward drops `position_ids`, so a packed row is one long
causal sequence (tokens attend across documents and positions run on)."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 96


def tiny_config(dropout: float = 0.0) -> LlamaConfig:
    return LlamaConfig(attention_dropout=dropout, vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False, attn_implementation="sdpa",
                       use_cache=False)  # with a cache transformers skips packed-sequence detection (docs/findings.md H2)


class PositionsDroppedLlama(LlamaForCausalLM):
    """The mutant: position_ids never reach the model (a wrapper or port that forgets to pass them on)."""

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, inputs_embeds=None,
                labels=None, use_cache=None, logits_to_keep=0, **kwargs):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, past_key_values=past_key_values,
                               inputs_embeds=inputs_embeds, labels=labels, use_cache=use_cache, logits_to_keep=logits_to_keep, **kwargs)


def tiny(cls=LlamaForCausalLM, dtype=torch.float32, seed: int = 0, dropout: float = 0.0):
    torch.manual_seed(seed)
    return cls(tiny_config(dropout)).to(dtype)



def drop_boundaries(model) -> None:
    """Seed the packing bug inside the decoder (model.model), where a trainer that computes its own head (TRL's
    fused_lm_head) still passes: its position_ids and flash-attention boundaries (cu_seq_lens_q/k, max_length_q/k,
    seq_idx) never arrive, so a packed row is one causal sequence."""
    dropped = ("position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")
    model.model.register_forward_pre_hook(lambda module, args, kwargs: (args, {k: v for k, v in kwargs.items() if k not in dropped}),
                                          with_kwargs=True)
