"""The reference model against transformers on the same checkpoint, and its document isolation.

The oracle is transformers' own LlamaForCausalLM / Qwen3ForCausalLM in float64 on CPU with
`attn_implementation="sdpa"`. HF always computes RMSNorm and RoPE angles in float32, which would
cap float64 agreement at ~1e-7; `exact_float64` replaces exactly those two float32 casts in the
HF modules by float64 (nothing else), so the comparison is float64 end to end. The float32 test
compares with the unpatched HF model, where those casts are no-ops, so the patch changes precision only.

Shapes: B batch, T sequence, L one document's length, V vocab.
"""

from __future__ import annotations

import json
import shutil
import types

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.nn.attention.flex_attention import flex_attention
from transformers import AutoModelForCausalLM

from packcheck.harness.models import model_spec
from packcheck.impls.reference.model import CausalLM
from packcheck.impls.reference.model import attention as attention_backends

FAMILIES = ["llama", "qwen3"]
DOC_LENGTHS = {"unpacked": [9, 16, 4], "packed": [7, 13, 1, 11, 5]}
FLOAT64_RTOL = 1e-10  # measured ~1e-15; anything above 1e-10 is a real difference, not rounding


# --- inputs ------------------------------------------------------------------------------------


def documents(lengths: list[int], vocab_size: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab_size, (length,), generator=generator) for length in lengths]


def packed_row(docs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One row holding every document, positions reset per document: ids, positions, segments [1, T]."""
    input_ids_T = torch.cat(docs)
    position_ids_T = torch.cat([torch.arange(len(doc)) for doc in docs])
    segment_ids_T = torch.cat([torch.full((len(doc),), i) for i, doc in enumerate(docs)])
    return input_ids_T[None], position_ids_T[None], segment_ids_T[None]


def padded_batch(docs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One document per row, right-padded; padding is segment 1 so it is never attended to. [B, T] each."""
    T = max(len(doc) for doc in docs)
    input_ids_BT = torch.zeros(len(docs), T, dtype=torch.long)
    segment_ids_BT = torch.ones(len(docs), T, dtype=torch.long)
    for row, doc in enumerate(docs):
        input_ids_BT[row, : len(doc)] = doc
        segment_ids_BT[row, : len(doc)] = 0
    position_ids_BT = torch.arange(T).expand(len(docs), T)
    return input_ids_BT, position_ids_BT, segment_ids_BT


def split_row(logits_TV: torch.Tensor, docs: list[torch.Tensor]) -> list[torch.Tensor]:
    return list(logits_TV.split([len(doc) for doc in docs]))


# --- the two models, logits per document -------------------------------------------------------


def ours_doc_logits(model: CausalLM, docs, layout: str, attention: str = "sdpa") -> list[torch.Tensor]:
    if layout == "packed":
        return split_row(model(*packed_row(docs), attention=attention)[0], docs)
    logits_BTV = model(*padded_batch(docs), attention=attention)
    return [logits_BTV[row, : len(doc)] for row, doc in enumerate(docs)]


def hf_doc_logits(hf, docs, layout: str, use_cache: bool = False) -> list[torch.Tensor]:
    """Unpacked: each document run on its own. Packed: one row, no attention_mask, positions reset."""
    if layout == "packed":
        input_ids_1T, position_ids_1T, _ = packed_row(docs)
        logits_1TV = hf(input_ids=input_ids_1T, position_ids=position_ids_1T, use_cache=use_cache).logits
        return split_row(logits_1TV[0], docs)
    return [hf(input_ids=doc[None], use_cache=use_cache).logits[0] for doc in docs]


def next_token_logprobs(doc_logits: list[torch.Tensor], docs: list[torch.Tensor]) -> torch.Tensor:
    """log p(token t+1 | tokens <= t) for every t within each document, concatenated."""
    return torch.cat([
        logits_LV[:-1].log_softmax(-1).gather(-1, doc[1:, None])[:, 0] for logits_LV, doc in zip(doc_logits, docs)
    ])


# --- loading -----------------------------------------------------------------------------------


def _rms_norm_forward_float64(self, hidden_states):
    # transformers' LlamaRMSNorm.forward with its `.to(torch.float32)` made `.to(torch.float64)`
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float64)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
    return self.weight * hidden_states.to(input_dtype)


def _rotary_forward_float64(self, x, position_ids):
    # transformers' LlamaRotaryEmbedding.forward with its `.float()` casts made float64
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(device=x.device, dtype=torch.float64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def exact_float64(hf):
    """Make the HF model's RMSNorms and RoPE compute in float64, as its float32 casts would in fp32."""
    config = hf.config
    dim = config.head_dim or config.hidden_size // config.num_attention_heads
    rotary = hf.model.rotary_emb
    rotary.inv_freq = 1.0 / (config.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    rotary.forward = types.MethodType(_rotary_forward_float64, rotary)
    norms = [module for module in hf.modules() if type(module).__name__.endswith("RMSNorm")]
    assert len(norms) >= 2 * config.num_hidden_layers + 1, "every decoder layer has two norms, plus the final norm"
    for norm in norms:
        norm.forward = types.MethodType(_rms_norm_forward_float64, norm)
    return hf


def load_models(family: str, dtype: torch.dtype, exact: bool = True):
    path = model_spec(family).checkpoint
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    if exact:
        assert dtype == torch.float64, "the float64 patch is only meaningful in float64"
        hf = exact_float64(hf)
    return CausalLM.from_checkpoint(path, dtype), hf


# --- comparisons -------------------------------------------------------------------------------


def rel_max_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours - reference).abs().max() / reference.abs().max()).item()


def rel_l2_errors(ours: torch.nn.Module, reference: torch.nn.Module) -> dict[str, float]:
    """||grad_ours - grad_ref|| / ||grad_ref|| for every parameter, by name."""
    ours_grads = {name: p.grad for name, p in ours.named_parameters()}
    ref_grads = {name: p.grad for name, p in reference.named_parameters()}
    assert ours_grads.keys() == ref_grads.keys(), sorted(ours_grads.keys() ^ ref_grads.keys())
    return {name: ((ours_grads[name] - g).norm() / g.norm()).item() for name, g in ref_grads.items()}


def max_logit_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b))


# --- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(DOC_LENGTHS))
@pytest.mark.parametrize("family", FAMILIES)
def test_logprobs_and_every_gradient_match_transformers_float64(family, layout):
    ours, hf = load_models(family, torch.float64)
    docs = documents(DOC_LENGTHS[layout], ours.config.vocab_size)

    ours_logprobs = next_token_logprobs(ours_doc_logits(ours, docs, layout), docs)
    hf_logprobs = next_token_logprobs(hf_doc_logits(hf, docs, layout), docs)
    ours_logprobs.sum().backward()
    hf_logprobs.sum().backward()

    logprob_error = rel_max_error(ours_logprobs, hf_logprobs)
    grad_errors = rel_l2_errors(ours, hf)
    worst = max(grad_errors, key=grad_errors.get)
    print(f"\n{family}/{layout}: log-prob rel err {logprob_error:.2e}; worst grad rel L2 {grad_errors[worst]:.2e} ({worst})")
    assert logprob_error <= FLOAT64_RTOL
    assert all(err <= FLOAT64_RTOL for err in grad_errors.values()), {n: e for n, e in grad_errors.items() if e > FLOAT64_RTOL}


@pytest.mark.parametrize("family", FAMILIES)
def test_float32_matches_unpatched_transformers(family):
    """Without the float64 patch, in float32 where HF's casts are no-ops, the models still agree."""
    ours, hf = load_models(family, torch.float32, exact=False)
    docs = documents(DOC_LENGTHS["packed"], ours.config.vocab_size)
    with torch.no_grad():
        diff = max_logit_diff(ours_doc_logits(ours, docs, "packed"), hf_doc_logits(hf, docs, "packed"))
    print(f"\n{family} float32 vs unpatched HF: max |logit diff| {diff:.2e}")
    assert diff <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_transformers_with_use_cache_leaks_across_packed_documents(family):
    """Pins a transformers behaviour: packed documents are isolated only when no KV cache is built.

    transformers derives the packed-sequence mask from position_ids resets only when attention_mask
    is None *and* there is no cache (masking_utils `_preprocess_mask_arguments`). With use_cache=True,
    the default in most released configs, forward builds a DynamicCache, the mask falls back to
    plain causal, and every document attends to the documents before it in the row. A trainer that
    packs and leaves use_cache on trains on cross-document attention. If this test starts failing,
    transformers has fixed it; update the note and the engines that work around it.
    """
    _, hf = load_models(family, torch.float64, exact=False)
    docs = documents(DOC_LENGTHS["packed"], hf.config.vocab_size)
    with torch.no_grad():
        alone = hf_doc_logits(hf, docs, "unpacked")
        isolated = hf_doc_logits(hf, docs, "packed", use_cache=False)
        leaked = hf_doc_logits(hf, docs, "packed", use_cache=True)
    leak = max_logit_diff(leaked, alone)
    print(f"\n{family} HF packed use_cache=True vs per-document: max |logit diff| {leak:.2e}")
    assert max_logit_diff(isolated, alone) <= 1e-5, "without a cache, HF isolates packed documents"
    assert leak > 1e-2


@pytest.mark.parametrize(("backend", "isolates"), [("sdpa", True), ("sdpa_causal", False)])
@pytest.mark.parametrize("family", FAMILIES)
def test_no_document_sees_another_in_a_packed_row(family, backend, isolates):
    """Changing document 0's tokens leaves the later documents' logits unchanged, unless the
    backend ignores segments (sdpa_causal), which shows the test can fail."""
    ours = CausalLM.from_checkpoint(model_spec(family).checkpoint, torch.float64)
    docs = documents(DOC_LENGTHS["packed"], ours.config.vocab_size)
    changed = [(docs[0] + 1) % ours.config.vocab_size, *docs[1:]]
    with torch.no_grad():
        before = ours_doc_logits(ours, docs, "packed", attention=backend)
        after = ours_doc_logits(ours, changed, "packed", attention=backend)
    others_change = max_logit_diff(before[1:], after[1:])
    print(f"\n{family}/{backend}: later documents' max |logit change| {others_change:.2e}")
    assert max_logit_diff(before[:1], after[:1]) > 1e-2, "the edit must change document 0 itself"
    if isolates:
        assert others_change <= 1e-12
    else:
        assert others_change > 1e-2


def flex_inputs(vocab_size: int, device: str) -> list[torch.Tensor]:
    """Two packed rows with different document boundaries: ids, positions, segments [2, T]."""
    docs = documents(DOC_LENGTHS["packed"], vocab_size)
    return [torch.cat(pair).to(device) for pair in zip(packed_row(docs), packed_row(docs[::-1]))]


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
def test_flex_blockmask_matches_sdpa_mask_float64(monkeypatch):
    """Uncompiled flex on CPU, forward only (CPU flex has no backward): checks the BlockMask and
    the arguments (scale, GQA) against the sdpa oracle in float64, without a 30 s compile."""
    monkeypatch.setattr(attention_backends, "_compiled_flex_attention", lambda: flex_attention)
    ours = CausalLM.from_checkpoint(model_spec("qwen3").checkpoint, torch.float64)
    inputs = flex_inputs(ours.config.vocab_size, "cpu")
    with torch.no_grad():
        diff = (ours(*inputs, attention="flex") - ours(*inputs, attention="sdpa")).abs().max().item()
    print(f"\nflex (eager, float64) vs sdpa: max |logit diff| {diff:.2e}")
    assert diff <= 1e-12


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled flex backward needs CUDA (CPU flex has none)")
@pytest.mark.parametrize("family", FAMILIES)
def test_compiled_flex_matches_sdpa_forward_and_backward(family):
    ours = CausalLM.from_checkpoint(model_spec(family).checkpoint, torch.float32, device="cuda")
    inputs = flex_inputs(ours.config.vocab_size, "cuda")
    grads = {}
    for backend in ("flex", "sdpa"):
        ours.zero_grad()
        logits_BTV = ours(*inputs, attention=backend)
        logits_BTV.log_softmax(-1).sum().backward()
        grads[backend] = (logits_BTV.detach(), {n: p.grad.clone() for n, p in ours.named_parameters()})
    (flex_logits, flex_grads), (sdpa_logits, sdpa_grads) = grads["flex"], grads["sdpa"]
    logit_error = rel_max_error(flex_logits, sdpa_logits)
    grad_errors = {n: ((flex_grads[n] - g).norm() / g.norm()).item() for n, g in sdpa_grads.items()}
    print(f"\n{family} flex (compiled, float32) vs sdpa: logit rel err {logit_error:.2e}, worst grad rel L2 {max(grad_errors.values()):.2e}")
    assert logit_error <= 1e-5
    assert all(err <= 1e-4 for err in grad_errors.values()), grad_errors


def test_loading_is_strict_and_names_the_mismatch(tmp_path):
    source = model_spec("qwen3").checkpoint
    shutil.copy(f"{source}/config.json", tmp_path / "config.json")
    tensors = load_file(f"{source}/model.safetensors")
    tensors["model.layers.0.self_attn.q_norm.scale"] = tensors.pop("model.layers.0.self_attn.q_norm.weight")
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing \['model.layers.0.self_attn.q_norm.weight'\], unexpected \['model.layers.0.self_attn.q_norm.scale'\]"):
        CausalLM.from_checkpoint(str(tmp_path), torch.float32)


def test_unsupported_model_type_is_refused(tmp_path):
    config = json.loads(open(f"{model_spec('llama').checkpoint}/config.json").read())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "gpt2"}))
    with pytest.raises(ValueError, match="unsupported model_type 'gpt2'"):
        CausalLM.from_checkpoint(str(tmp_path), torch.float32)
