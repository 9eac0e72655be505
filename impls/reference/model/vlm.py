"""The reference vision-language model (Qwen2.5-VL): vision tower, placeholder merge, 3D MRoPE,
the dense decoder; loads HF checkpoints.

Mirrors transformers' Qwen2_5_VLForConditionalGeneration (`model.visual`, `model.language_model.
{embed_tokens, layers.N, norm}`, `lm_head`), so `named_parameters()` yields exactly the checkpoint's
names. The decoder layers are the dense ones (layers.py) with q/k/v biases; RoPE is MRoPE.

The tower and the decoder run separately: the trainer encodes a micro-batch's images once
(`encode_images`, on every rank and every micro-batch, a dummy image when it has none) and each
forward takes the merged features and, per position, which feature replaces its placeholder
embedding (`image_index_BT`, -1 for text). The features also enter every forward multiplied by
exactly zero, so the tower is part of every forward's graph (a trainable tower then receives its
zero gradient on text-only micro-batches too) while the loss and gradients are exactly the text's.

Shapes: B rows, T tokens, C hidden_size, D head_dim, V vocab_size, N merged image tokens, P patches, F patch_dim.
"""

from __future__ import annotations

import torch
from torch import nn

from packcheck.impls.reference.model.attention import AttentionBackend, get_attention_backend
from packcheck.impls.reference.model.causal_lm import DecoderStack, load_weights
from packcheck.impls.reference.model.mrope import mrope_cos_sin
from packcheck.impls.reference.model.vision import VisionTower
from packcheck.impls.reference.model.vlm_config import VLMConfig


class VLMBody(nn.Module):
    def __init__(self, config: VLMConfig):
        super().__init__()
        self.visual = VisionTower(config.vision)
        self.language_model = DecoderStack(config.text)


class VisionLanguageLM(nn.Module):
    def __init__(self, config: VLMConfig):
        super().__init__()
        self.config = config
        self.model = VLMBody(config)
        self.lm_head = nn.Linear(config.text.hidden_size, config.text.vocab_size, bias=False)
        if config.text.tie_word_embeddings:
            self.lm_head.weight = self.model.language_model.embed_tokens.weight

    def encode_images(self, pixels_PF: torch.Tensor, grids_thw: list[tuple[int, int, int]]) -> torch.Tensor:
        """The merged features of the images, in order: [N, C]."""
        return self.model.visual(pixels_PF, grids_thw)

    def forward(
        self,
        input_ids_BT: torch.Tensor,
        position_ids_BT: torch.Tensor,
        segment_ids_BT: torch.Tensor,
        attention: str | AttentionBackend = "sdpa",
        image_features_NC: torch.Tensor | None = None,
        image_index_BT: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`position_ids_BT`: [B, T, 3] MRoPE positions, or [B, T] text positions (all three axes equal, as HF reads 2D ids)."""
        assert input_ids_BT.shape == position_ids_BT.shape[:2] == segment_ids_BT.shape, "ids, positions, segments must align"
        backend = attention if isinstance(attention, AttentionBackend) else get_attention_backend(attention)
        mask = backend.build_mask(segment_ids_BT)
        stack = self.model.language_model
        x_BTC = stack.embed_tokens(input_ids_BT)
        if image_features_NC is not None:
            x_BTC = merge_image_features(x_BTC, image_features_NC.to(x_BTC.dtype), image_index_BT)
        positions_BT3 = position_ids_BT if position_ids_BT.dim() == 3 else position_ids_BT[..., None].expand(-1, -1, 3)
        text = self.config.text
        cos_BTD, sin_BTD = mrope_cos_sin(positions_BT3, text.head_dim, text.rope_theta, self.config.mrope_section, x_BTC.dtype)
        for layer in stack.layers:
            x_BTC = layer(x_BTC, cos_BTD, sin_BTD, backend, mask)
        return self.lm_head(stack.norm(x_BTC))  # logits_BTV

    @classmethod
    def from_checkpoint(cls, path: str, dtype: torch.dtype, device: str | torch.device = "cpu") -> VisionLanguageLM:
        config = VLMConfig.from_checkpoint(path)
        with torch.device(device):
            model = cls(config).to(dtype)
        return load_weights(model, path, config.model_type, device)


def merge_image_features(x_BTC: torch.Tensor, features_NC: torch.Tensor, image_index_BT: torch.Tensor) -> torch.Tensor:
    """Each placeholder's embedding replaced by its image feature; the features also enter times exactly zero."""
    is_image_BT1 = (image_index_BT >= 0)[..., None]
    x_BTC = torch.where(is_image_BT1, features_NC[image_index_BT.clamp(min=0)], x_BTC)
    return x_BTC + 0.0 * features_NC.sum()
