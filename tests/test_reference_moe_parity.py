"""The reference MoE model (qwen3_moe) against transformers' Qwen3MoeForCausalLM on the same checkpoint.

The oracle is transformers' own model in float64 on CPU, with the float64 patch of
tests/test_reference_model_parity.py (RMSNorm, RoPE) and one more float32 cast made float64: HF's
router computes its softmax in float32 always (`Qwen3MoeTopKRouter.forward`, `dtype=torch.float`),
which caps the experts' weights, and so logits, at ~1e-7; `_router_forward_float64` is that
forward with the cast made float64, nothing else.

HF's `load_balancing_loss_func` accumulates the router probabilities in float32
(`routing_weights.float()`), and its LM loss upcasts the logits to float32 (`ForCausalLMLoss`:
`logits.float()`), so HF's training loss is float32 even in a float64 model: its `aux_loss` agrees
with a float64 evaluation to ~2e-8 and the gradients of its loss + coef * aux to ~6e-8 (measured).
The aux loss is therefore checked twice: against HF's `aux_loss` and HF's training gradients to
1e-6 (end to end, through the reference engine, on a padded batch with attention_mask), and in
float64 against an independent evaluation of the same definition from HF's own float64 router
logits to 1e-12.

Shapes: B batch, T sequence, N tokens, E experts, K experts per token, L sparse layers.
"""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from packcheck.harness.contract import UNPACKED, Case, Partition, Sample
from packcheck.harness.models import model_spec
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.model.moe import SparseMoeBlock
from tests.test_reference_model_parity import (
    DOC_LENGTHS, FLOAT64_RTOL, documents, exact_float64, hf_doc_logits, next_token_logprobs, ours_doc_logits, rel_l2_errors,
    rel_max_error,
)

# HF's float32 aux accumulation and LM loss (see the docstring): measured 1.7e-8 (aux) and 6.4e-8 (worst gradient)
HF_AUX_RTOL = 1e-6
# sparse/dense layer choices as HF makes them: all sparse, layer 1 dense by mlp_only_layers, every 2nd sparse
LAYER_CHOICES = {"all_sparse": {}, "mlp_only_1": {"mlp_only_layers": [1]}, "sparse_step_2": {"decoder_sparse_step": 2}}


def _router_forward_float64(self, hidden_states):
    # transformers' Qwen3MoeTopKRouter.forward with its softmax `dtype=torch.float` made float64
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    router_logits = F.linear(hidden_states, self.weight)
    router_probs = torch.nn.functional.softmax(router_logits, dtype=torch.float64, dim=-1)
    router_top_value, router_indices = torch.topk(router_probs, self.top_k, dim=-1)
    if self.norm_topk_prob:
        router_top_value /= router_top_value.sum(dim=-1, keepdim=True)
    return router_logits, router_top_value.to(router_logits.dtype), router_indices


def load_moe_models(spec, exact: bool = True):
    # experts_implementation="eager": the default grouped_mm kernel has no float64 (and "eager" is the loop HF documents)
    hf = AutoModelForCausalLM.from_pretrained(spec.checkpoint, dtype=torch.float64, attn_implementation="sdpa", experts_implementation="eager")
    if exact:
        hf = exact_float64(hf)
        routers = [m for m in hf.modules() if type(m).__name__ == "Qwen3MoeTopKRouter"]
        for router in routers:
            router.forward = types.MethodType(_router_forward_float64, router)
    return CausalLM.from_checkpoint(spec.checkpoint, torch.float64), hf


@pytest.mark.parametrize("choice", sorted(LAYER_CHOICES))
def test_moe_logprobs_and_every_gradient_match_transformers_float64(choice):
    spec = model_spec("qwen3_moe", **LAYER_CHOICES[choice])
    ours, hf = load_moe_models(spec)
    sparse_ours = [i for i, layer in enumerate(ours.model.layers) if isinstance(layer.mlp, SparseMoeBlock)]
    sparse_hf = [i for i, layer in enumerate(hf.model.layers) if type(layer.mlp).__name__ == "Qwen3MoeSparseMoeBlock"]
    assert sparse_ours == sparse_hf == list(ours.config.sparse_layers) and sparse_ours, (sparse_ours, sparse_hf)
    docs = documents(DOC_LENGTHS["unpacked"], ours.config.vocab_size)

    ours_logprobs = next_token_logprobs(ours_doc_logits(ours, docs, "unpacked"), docs)
    hf_logprobs = next_token_logprobs(hf_doc_logits(hf, docs, "unpacked"), docs)
    ours_logprobs.sum().backward()
    hf_logprobs.sum().backward()

    logprob_error = rel_max_error(ours_logprobs, hf_logprobs)
    grad_errors = rel_l2_errors(ours, hf)
    worst = max(grad_errors, key=grad_errors.get)
    print(f"\nqwen3_moe/{choice}: log-prob rel err {logprob_error:.2e}; worst grad rel L2 {grad_errors[worst]:.2e} ({worst})")
    assert logprob_error <= FLOAT64_RTOL
    assert all(err <= FLOAT64_RTOL for err in grad_errors.values()), {n: e for n, e in grad_errors.items() if e > FLOAT64_RTOL}


def test_unpatched_transformers_router_caps_float64_agreement_at_float32():
    """Why the router patch: without it HF's float32 router softmax is the only difference, ~1e-7 and not less."""
    ours, hf = load_moe_models(model_spec("qwen3_moe"), exact=False)
    hf = exact_float64(hf)  # norms and RoPE in float64: the router is what is left
    docs = documents(DOC_LENGTHS["unpacked"], ours.config.vocab_size)
    with torch.no_grad():
        error = rel_max_error(next_token_logprobs(ours_doc_logits(ours, docs, "unpacked"), docs),
                              next_token_logprobs(hf_doc_logits(hf, docs, "unpacked"), docs))
    print(f"\nqwen3_moe vs HF with its float32 router softmax: log-prob rel err {error:.2e}")
    assert 1e-12 < error <= 1e-5


def padded_hf_inputs(docs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels (-100 on padding) [B, T]."""
    T = max(len(doc) for doc in docs)
    input_ids_BT = torch.zeros(len(docs), T, dtype=torch.long)
    attention_mask_BT = torch.zeros(len(docs), T, dtype=torch.long)
    for row, doc in enumerate(docs):
        input_ids_BT[row, : len(doc)] = doc
        attention_mask_BT[row, : len(doc)] = 1
    return input_ids_BT, attention_mask_BT, input_ids_BT.masked_fill(attention_mask_BT == 0, -100)


def aux_by_definition(router_logits: tuple[torch.Tensor, ...], real_N: torch.Tensor, top_k: int) -> float:
    """Switch/HF load-balancing loss over the real tokens, written out in float64: every layer's real tokens stacked
    (tokens of all layers jointly), E * sum over (k, e) of the fraction routed x the mean router probability."""
    probs_NE = torch.cat([logits.softmax(-1)[real_N] for logits in router_logits])
    chosen_NKE = F.one_hot(probs_NE.topk(top_k, dim=-1).indices, probs_NE.shape[-1]).double()
    return (probs_NE.shape[-1] * (chosen_NKE.mean(0) * probs_NE.mean(0)).sum()).item()


def test_aux_loss_equals_transformers_on_a_padded_batch():
    """The reference engine's aux loss (its global definition, over non-padding tokens) equals HF's `aux_loss` on an
    unpacked padded batch with attention_mask, and its training gradients HF's loss + coef * aux_loss."""
    spec = model_spec("qwen3_moe")
    _, hf = load_moe_models(spec)
    docs = documents(DOC_LENGTHS["unpacked"], hf.config.vocab_size)
    input_ids_BT, attention_mask_BT, labels_BT = padded_hf_inputs(docs)
    out = hf(input_ids=input_ids_BT, attention_mask=attention_mask_BT, labels=labels_BT, output_router_logits=True, use_cache=False)
    out.loss.backward()

    samples = tuple(Sample(input_ids=doc.tolist(), loss_mask=[0] + [1] * (len(doc) - 1)) for doc in docs)
    case = Case(name="moe-parity", model=spec, samples=samples, layout=UNPACKED, dtype="float64",
                partition=Partition.single_rank([tuple(range(len(docs)))]))
    result = ReferenceEngine().run(case)

    real_N = attention_mask_BT.reshape(-1).bool()
    definition = aux_by_definition(out.router_logits, real_N, hf.config.num_experts_per_tok)
    aux_error = abs(result.aux_loss - out.aux_loss.item()) / out.aux_loss.item()
    grad_errors = {n: ((result.grads[n] - p.grad).norm() / p.grad.norm()).item() for n, p in hf.named_parameters()}
    worst = max(grad_errors, key=grad_errors.get)
    print(f"\nqwen3_moe aux: ours {result.aux_loss:.15g}, HF {out.aux_loss.item():.15g} (rel {aux_error:.2e}), float64 definition "
          f"rel {abs(result.aux_loss - definition) / definition:.2e}; "
          f"worst grad rel L2 {grad_errors[worst]:.2e} ({worst})")
    assert abs(result.aux_loss - definition) <= 1e-12 * definition
    assert aux_error <= HF_AUX_RTOL
    assert all(err <= HF_AUX_RTOL for err in grad_errors.values()), {n: e for n, e in grad_errors.items() if e > HF_AUX_RTOL}
    counts_LE = torch.stack([torch.bincount(logits.topk(2, dim=-1).indices[real_N].flatten(), minlength=4) for logits in out.router_logits])
    assert torch.equal(result.router_tokens_per_expert, counts_LE)
