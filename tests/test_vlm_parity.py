"""The reference vision-language model against transformers' Qwen2_5_VLForConditionalGeneration
on the same checkpoint, unpacked, in float64: logits, log-probs and every gradient (the vision
tower's included: the parity test trains it, the trainer keeps it frozen).

HF computes RMSNorm, the text MRoPE angles, the vision rotary angles and their application in
float32, which would cap float64 agreement at ~1e-7; `exact_float64_vlm` replaces exactly those
float32 casts by float64 (nothing else), as tests/test_reference_model_parity.py does for the
dense families. Qwen2.5-VL's window permutation runs unpatched: with every vision block in
`fullatt_block_indexes` it only reorders tokens that attend to one another, and the comparison
shows it is a no-op to float64 rounding.

Shapes: L one document's length, V vocab, P patches, F patch_dim.
"""

from __future__ import annotations

import types

import pytest
import torch
from transformers import Qwen2_5_VLForConditionalGeneration
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

from packcheck.harness.data.images import image_sample
from packcheck.harness.models import model_spec
from packcheck.impls.reference.model.mrope import document_positions
from packcheck.impls.reference.model.vlm import VisionLanguageLM
from test_reference_model_parity import _rms_norm_forward_float64, rel_l2_errors, rel_max_error

FLOAT64_RTOL = 1e-10
# (length, grids): text only, one image, two images of other shapes, an image right at the start
DOCUMENTS = [(9, ()), (14, ((1, 4, 4),)), (21, ((1, 2, 4), (1, 4, 2))), (8, ((1, 2, 2),))]


def _mrope_forward_float64(self, x, position_ids):
    # Qwen2_5_VLRotaryEmbedding.forward with its `.float()` casts made float64
    position_ids = position_ids.expand(3, -1, -1)
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(device=x.device, dtype=torch.float64)
    cos, sin = self.recomposition_frequencies(freqs.cos()), self.recomposition_frequencies(freqs.sin())
    return cos.to(x.dtype), sin.to(x.dtype)


def _vision_rotary_forward_float64(self, x, position_ids):
    # Qwen2_5_VLVisionRotaryEmbedding.forward with its `.float()` casts made float64
    freqs = position_ids[..., None].to(torch.float64) * self.inv_freq.to(device=x.device, dtype=torch.float64)
    return self.recomposition_frequencies(freqs.cos()), self.recomposition_frequencies(freqs.sin())


def _apply_rotary_pos_emb_vision_float64(q, k, cos, sin):
    # apply_rotary_pos_emb_vision without its float32 round trip
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    rotate = modeling_qwen2_5_vl.rotate_half
    return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


def exact_float64_vlm(hf, monkeypatch):
    text, vision = hf.config.text_config, hf.config.vision_config
    head_dim = text.hidden_size // text.num_attention_heads
    rotary = hf.model.language_model.rotary_emb
    rotary.inv_freq = 1.0 / (text.rope_parameters["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    rotary.forward = types.MethodType(_mrope_forward_float64, rotary)
    spatial = (vision.hidden_size // vision.num_heads) // 2
    vision_rotary = hf.model.visual.rotary_pos_emb
    vision_rotary.inv_freq = 1.0 / (vision.rope_parameters["rope_theta"] ** (torch.arange(0, spatial, 2, dtype=torch.float64) / spatial))
    vision_rotary.forward = types.MethodType(_vision_rotary_forward_float64, vision_rotary)
    monkeypatch.setattr(modeling_qwen2_5_vl, "apply_rotary_pos_emb_vision", _apply_rotary_pos_emb_vision_float64)
    norms = [m for m in hf.modules() if type(m).__name__.endswith("RMSNorm")]
    assert len(norms) == 2 * text.num_hidden_layers + 1 + 2 * vision.depth + 1, "decoder, final, vision block and merger norms"
    for norm in norms:
        norm.forward = types.MethodType(_rms_norm_forward_float64, norm)
    return hf


@pytest.fixture
def models(monkeypatch):
    path = model_spec("qwen2_5_vl").checkpoint
    hf = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, dtype=torch.float64, attn_implementation="sdpa")
    return VisionLanguageLM.from_checkpoint(path, torch.float64), exact_float64_vlm(hf, monkeypatch)


def documents():
    spec = model_spec("qwen2_5_vl")
    return [image_sample(length, grids, spec.vision, seed=i) for i, (length, grids) in enumerate(DOCUMENTS)]


def pixels_and_grids(sample):
    patch_dim = len(sample.images[0].pixel_values) // sample.images[0].num_patches
    pixels_PF = torch.tensor([v for image in sample.images for v in image.pixel_values], dtype=torch.float64).view(-1, patch_dim)
    return pixels_PF, [image.grid_thw for image in sample.images]


def ours_logits(model: VisionLanguageLM, sample) -> torch.Tensor:
    ids_1L = torch.tensor([sample.input_ids])
    config = model.config
    positions_1L3 = document_positions(sample.input_ids, [i.grid_thw for i in sample.images], config.image_token_id,
                                       config.vision.spatial_merge_size)[None]
    features = index_1L = None
    if sample.images:
        features = model.encode_images(*pixels_and_grids(sample))
        is_image = ids_1L == config.image_token_id
        index_1L = torch.where(is_image, is_image.long().cumsum(-1) - 1, -1)
    return model(ids_1L, positions_1L3, torch.zeros_like(ids_1L), "sdpa", features, index_1L)[0]


def hf_logits(hf, sample) -> torch.Tensor:
    ids_1L = torch.tensor([sample.input_ids])
    if not sample.images:
        return hf(input_ids=ids_1L, use_cache=False).logits[0]
    pixels_PF, grids = pixels_and_grids(sample)
    token_types_1L = (ids_1L == hf.config.image_token_id).int()
    return hf(input_ids=ids_1L, pixel_values=pixels_PF, image_grid_thw=torch.tensor(grids), mm_token_type_ids=token_types_1L,
              use_cache=False).logits[0]


def logprobs(logits_LV: torch.Tensor, sample) -> torch.Tensor:
    ids = torch.tensor(sample.input_ids)
    return logits_LV[:-1].log_softmax(-1).gather(-1, ids[1:, None])[:, 0]


def test_mrope_positions_match_get_rope_index(models):
    ours, hf = models
    for sample in documents():
        if not sample.images:
            continue
        ids_1L = torch.tensor([sample.input_ids])
        theirs_31L, _ = hf.model.get_rope_index(ids_1L, (ids_1L == hf.config.image_token_id).int(),
                                                image_grid_thw=torch.tensor([i.grid_thw for i in sample.images]))
        mine_L3 = document_positions(sample.input_ids, [i.grid_thw for i in sample.images], hf.config.image_token_id, 2)
        assert torch.equal(mine_L3.T, theirs_31L[:, 0]), (mine_L3.T, theirs_31L[:, 0])


def test_logits_and_every_gradient_match_transformers_float64(models):
    ours, hf = models
    samples = documents()
    ours_lp = torch.cat([logprobs(ours_logits(ours, s), s) for s in samples])
    hf_lp = torch.cat([logprobs(hf_logits(hf, s), s) for s in samples])
    with torch.no_grad():
        logit_error = max(rel_max_error(ours_logits(ours, s), hf_logits(hf, s)) for s in samples)
    ours_lp.sum().backward()
    hf_lp.sum().backward()
    grad_errors = rel_l2_errors(ours, hf)
    worst = max(grad_errors, key=grad_errors.get)
    print(f"\nqwen2_5_vl: logit rel err {logit_error:.2e}, log-prob rel err {rel_max_error(ours_lp, hf_lp):.2e}; "
          f"worst grad rel L2 {grad_errors[worst]:.2e} ({worst})")
    assert logit_error <= FLOAT64_RTOL
    assert rel_max_error(ours_lp, hf_lp) <= FLOAT64_RTOL
    assert all(e <= FLOAT64_RTOL for e in grad_errors.values()), {n: e for n, e in grad_errors.items() if e > FLOAT64_RTOL}
    assert any("visual" in n for n in grad_errors), "the vision tower's gradients are compared too"
