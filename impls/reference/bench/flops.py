"""The FLOPs of one training step of a dense decoder (Llama / Qwen3 layout), counted explicitly, and
MFU against a peak. Only the model's own work counts: padding tokens, recomputation (the chunked
log-prob's second lm_head matmul) and the optimizer do not.

With L layers, C hidden, F intermediate, H query / K key-value heads of D, V vocab:

    matmul parameters  P = L (C·H·D + 2·C·K·D + H·D·C + 3·C·F) + V·C
                           (q, k and v, o; gate, up and down; the lm_head. Biases, norms and the
                           embedding lookup are left out)
    dense FLOPs        6 · P · n            n = document tokens of the step (padding excluded);
                                             2 per multiply-add, x3 for forward + backward
    attention FLOPs    3 · L · Σ_docs 2 · H · D · ℓ(ℓ + 1)
                           per layer and head a document of ℓ tokens has ℓ(ℓ+1)/2 causal pairs,
                           each 2·D FLOPs for QKᵀ and 2·D for PV; x3 for forward + backward
    MFU                (dense + attention) / step seconds / peak

The peak is the dense bf16 tensor-core rate of an H100/H200 SXM, 989 TFLOP/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

H200_BF16_PEAK = 989e12


@dataclass(frozen=True, kw_only=True, slots=True)
class StepFlops:
    matmul_params: int
    tokens: int  # document tokens
    dense: float
    attention: float

    @property
    def total(self) -> float:
        return self.dense + self.attention

    def to_json(self) -> dict:
        return {**asdict(self), "total": self.total}


def matmul_params(config: dict) -> int:
    C, F, L, V = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"], config["vocab_size"]
    H, K = config["num_attention_heads"], config["num_key_value_heads"]
    D = config.get("head_dim") or C // H
    if config.get("num_experts"):
        raise ValueError("the benchmark's FLOPs count dense decoders only (llama, qwen3); a MoE model's routed FLOPs are not counted here")
    return L * (C * H * D + 2 * C * K * D + H * D * C + 3 * C * F) + V * C


def step_flops(config: dict, document_lengths: Sequence[int]) -> StepFlops:
    """FLOPs of one forward + backward over these documents."""
    H, L = config["num_attention_heads"], config["num_hidden_layers"]
    D = config.get("head_dim") or config["hidden_size"] // H
    params, tokens = matmul_params(config), sum(document_lengths)
    attention = 3 * L * sum(2 * H * D * n * (n + 1) for n in document_lengths)
    return StepFlops(matmul_params=params, tokens=tokens, dense=6.0 * params * tokens, attention=float(attention))


def mfu(flops: float, seconds: float, peak: float = H200_BF16_PEAK) -> float:
    return flops / seconds / peak
