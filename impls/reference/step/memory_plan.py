"""Whether a step of the reference fits its device as it is, and if not, the two savings that make an 8B step fit.

    plan = memory_plan(config, dtype_bytes, capacity, forwards)   # forwards: (rows, width) of each; both savings or neither
    pipe = plan.apply(model, pipe)                                       # the model and the pipeline with them

The savings, each computing the same numbers (tests/test_memory_plan.py, float64 on the CPU):

- activation checkpointing per decoder layer (CausalLM.checkpoint_layers): a layer keeps only its input for backward
  and recomputes the rest there (one more forward of every layer). The same operations on the same values: float64
  gradients bit for bit the same.
- chunked log-probs (loss/chunked_logprobs.py, reference.fast's): the [tokens, vocab] logits never exist; one chunk's
  at a time. Within float64 rounding (<= 1e-12 relative), not bit for bit: the lm_head's gradient is summed chunk by
  chunk. In bfloat16 the log-probs come out in float32 (the plain path rounds them to bfloat16).

They are switched on by need (in bfloat16 and float32 never at the tiny or 0.6b sizes): when the eager step's estimate exceeds the device's
memory less the harness's share (RESULTS_SHARE of harness/launch/device_result.py: it holds a verdict's results on the
same GPU), or when the model is large for the device: its weights and gradients alone over that share (8B on an H200:
32 GB against 19). The second rule keeps an 8B arm with a short forward (8,160 slots: an estimated 119 GB eager, within
the 132 GB allowed) from running eager on an estimate calibrated at 0.6b. The estimate, per token of the largest
forward (rows x width, padding included):

    eager:  layers x (12 C + 5 F + 6 (H D + 2 K D)) x bytes  (what one decoder layer saves for backward)
            + 2 x vocab x bytes                              (the logits and the log-softmax output, kept to backward)
    plus the weights and their gradients (2 x parameters x bytes), and in float64 every layer's attention matrices:
    float64 has no fused attention kernel on CUDA, so SDPA's math path keeps the scores and the probabilities,
    2 x rows x H x width^2 x 8 bytes a layer (0.6b, one 4080-token row: 4.3 GB a layer, 119 GB for 28; the float64
    oracle on an H200 asked for 116 GiB there and failed, docs/gpu.md). With checkpointing one layer's are alive at once.

The per-layer figure is the 105 KiB per token measured with saved_tensors_hooks at the 0.6b widths (docs/performance.md),
and the whole matches the eager reference's measured peak there: 113.5 GiB at 32768 tokens a step (this estimate: 3.5 MB
per token). At 8B it is 10.6 MB per token (llama): 33,660 slots (microbatch_invariance's unpacked arm) would need 389
GB eager, and 0.59 MB per token with both savings (one layer's activations plus every layer's input: 20 GB).

Only the dense CausalLM (llama, qwen3) takes them: a MoE layer records its routing as it runs (a recomputation would
record it twice), and the hybrid and vision-language models have forwards of their own. A pipeline whose log-prob step
is not the plain one (a mutant's own kernel) keeps it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from packcheck.impls.reference.data.predictions import label_logprobs
from packcheck.impls.reference.loss.chunked_logprobs import chunked_label_logprobs
from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.step.pipeline import Pipeline

HARNESS_SHARE = 1 / 8  # of a GPU, for the harness's copies of results (harness/launch/device_result.py RESULTS_SHARE)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryPlan:
    saving: bool  # activation checkpointing per decoder layer and chunked log-probs, together
    eager_bytes: int  # the estimate of the step as it is
    budget_bytes: int

    def describe(self) -> str:
        gb = lambda n: f"{n / 1e9:.1f} GB"  # noqa: E731
        if not self.saving:
            return f"eager step (estimate {gb(self.eager_bytes)} within {gb(self.budget_bytes)})"
        return (f"activation checkpointing per decoder layer and chunked log-probs: the eager step's estimate {gb(self.eager_bytes)} "
                f"exceeds {gb(self.budget_bytes)}")

    def apply(self, model: torch.nn.Module, pipe: Pipeline) -> Pipeline:
        """Switch the savings on in `model` (a dense CausalLM only) and `pipe` (its plain log-prob step only)."""
        if not self.saving or not plannable(model):
            return pipe
        model.checkpoint_layers = True
        if pipe.label_logprobs is label_logprobs:
            model.lm_head_inputs = True
            return replace(pipe, label_logprobs=chunked_label_logprobs)
        return pipe


NONE = MemoryPlan(saving=False, eager_bytes=0, budget_bytes=0)


def plannable(model: torch.nn.Module) -> bool:
    """The dense CausalLM (llama, qwen3): the model the savings exist for (the module docstring)."""
    return type(model) is CausalLM and not model.config.num_experts


def layer_bytes_per_token(config: ModelConfig, element: int) -> int:
    """What one decoder layer saves for backward per token (the module docstring)."""
    C, F, H, K, D = config.hidden_size, config.intermediate_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim
    return element * (12 * C + 5 * F + 6 * (H * D + 2 * K * D))


def parameter_count(config: ModelConfig) -> int:
    """A dense decoder's parameters: embeddings, lm_head (untied), attention, MLP and norms of every layer."""
    C, F, H, K, D, V = (config.hidden_size, config.intermediate_size, config.num_attention_heads, config.num_key_value_heads,
                        config.head_dim, config.vocab_size)
    per_layer = C * (H * D) * 2 + C * (K * D) * 2 + 3 * C * F + 2 * C + (2 * D if config.qk_norm else 0)
    return V * C * (1 if config.tie_word_embeddings else 2) + config.num_hidden_layers * per_layer + C


def attention_bytes(config: ModelConfig, element: int, rows: int, width: int) -> int:
    """One layer's attention matrices kept for backward: only float64's (the module docstring); fused kernels keep O(width)."""
    return 2 * rows * config.num_attention_heads * width * width * element if element >= 8 else 0


def eager_bytes(config: ModelConfig, element: int, forwards: Sequence[tuple[int, int]]) -> int:
    """The estimate of an eager step whose forwards have these (rows, width) shapes, padding included."""
    per_token = config.num_hidden_layers * layer_bytes_per_token(config, element) + 2 * config.vocab_size * element
    largest = max((rows * width * per_token + config.num_hidden_layers * attention_bytes(config, element, rows, width)
                   for rows, width in forwards), default=0)
    return 2 * parameter_count(config) * element + largest


def device_bytes(device: torch.device | str) -> int:
    """The memory of `device`: a GPU's, or the host's for the CPU."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def memory_plan(config: ModelConfig, element: int, capacity: int, forwards: Sequence[tuple[int, int]]) -> MemoryPlan:
    """Both savings when the eager step's estimate exceeds `capacity` less the harness's share, or when the weights and
    their gradients alone take more than that share (a large model: every arm saves, not only its long forwards); else
    neither."""
    need, budget = eager_bytes(config, element, forwards), int(capacity * (1 - HARNESS_SHARE))
    large = 2 * parameter_count(config) * element > capacity * HARNESS_SHARE
    return MemoryPlan(saving=need > budget or large, eager_bytes=need, budget_bytes=budget)
