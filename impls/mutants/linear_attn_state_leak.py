"""mutant.linear-attn-state-leak: GatedDeltaNet conv and recurrent state run on across the
documents of a packed row.

Where it happened: prime-rl #3002 / PR #3003, NeMo Automodel PR #2147, and transformers' own
Qwen3.5 / Qwen3-Next layers under position-id packing: the linear-attention kernels get no
cu_seqlens, so each row is one sequence and every document starts from the state (and the last
conv-kernel tokens) the previous document left behind. Attention stays document-causal, so only
the linear-attention layers leak.
"""

import dataclasses

import torch

from packcheck.harness.contract import Case
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model.linear_attention import LinearAttentionBackend, get_linear_attention_backend


def one_sequence_per_row(backend: LinearAttentionBackend) -> LinearAttentionBackend:
    """`backend` with every row's segment ids made one segment (the bug: no per-document boundaries)."""
    return dataclasses.replace(
        backend,
        name=f"{backend.name}_rowwise",
        conv=lambda x, weight, segment_ids_BT, shards: backend.conv(x, weight, torch.zeros_like(segment_ids_BT), shards),
        delta_rule=lambda q, k, v, g, beta, segment_ids_BT: backend.delta_rule(q, k, v, g, beta, torch.zeros_like(segment_ids_BT)),
    )


class LinearAttnStateLeak(ReferenceEngine):
    name = "mutant.linear-attn-state-leak"
    bug = "linear-attn-state-leak"
    capabilities = dataclasses.replace(ReferenceEngine.capabilities, families=frozenset({"qwen3_5"}))

    def linear_attention_backend(self, case: Case) -> LinearAttentionBackend:
        return one_sequence_per_row(get_linear_attention_backend(super().linear_attention_backend(case)))
