"""The reference causal LM: embeddings, decoder layers, final norm, LM head; loads HF checkpoints.

Mirrors transformers' LlamaForCausalLM / Qwen3ForCausalLM (`model.embed_tokens`, `model.layers.N`,
`model.norm`, `lm_head`), so `named_parameters()` yields exactly the checkpoint's names. Unlike
HF, the forward takes explicit positions and segment ids: a token attends causally only to
earlier tokens of its own segment, so packed documents never see each other.

Shapes: B batch, T sequence, C hidden_size, D head_dim, V vocab_size.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn
from torch.utils.checkpoint import checkpoint

from packcheck.impls.reference.model.attention import AttentionBackend, get_attention_backend
from packcheck.impls.reference.model.config import ModelConfig
from packcheck.impls.reference.model.hybrid import HybridCausalLM
from packcheck.impls.reference.model.hybrid_config import is_hybrid_checkpoint
from packcheck.impls.reference.model.layers import DecoderLayer
from packcheck.impls.reference.model.lm_head_inputs import LmHeadInputs
from packcheck.impls.reference.model.norm import RMSNorm
from packcheck.impls.reference.model.rope import rope_cos_sin


class DecoderStack(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    config_class = ModelConfig
    # reference.fast sets this: forward returns LmHeadInputs (hidden states, lm_head weight) for a chunked log-prob
    lm_head_inputs = False
    # a step too large for its device sets this (step/memory_plan.py): each layer keeps only its input for backward
    checkpoint_layers = False

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.model = DecoderStack(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids_BT: torch.Tensor,
        position_ids_BT: torch.Tensor,
        segment_ids_BT: torch.Tensor,
        attention: str | AttentionBackend = "sdpa",
    ) -> torch.Tensor:
        assert input_ids_BT.shape == position_ids_BT.shape == segment_ids_BT.shape, "ids, positions, segments must align"
        backend = attention if isinstance(attention, AttentionBackend) else get_attention_backend(attention)
        mask = backend.build_mask(segment_ids_BT)
        x_BTC = self.model.embed_tokens(input_ids_BT)
        cos_BTD, sin_BTD = rope_cos_sin(position_ids_BT, self.config.head_dim, self.config.rope_theta, x_BTC.dtype)
        recompute = self.checkpoint_layers and torch.is_grad_enabled()
        for layer in self.model.layers:
            if recompute:  # non-reentrant: the mask may be any object (a BlockMask), and DDP's hooks see one backward
                x_BTC = checkpoint(layer, x_BTC, cos_BTD, sin_BTD, backend, mask, use_reentrant=False)
            else:
                x_BTC = layer(x_BTC, cos_BTD, sin_BTD, backend, mask)
        if self.lm_head_inputs:
            return LmHeadInputs(self.model.norm(x_BTC), self.lm_head.weight)
        return self.lm_head(self.model.norm(x_BTC))  # logits_BTV

    @classmethod
    def from_checkpoint(cls, path: str, dtype: torch.dtype, device: str | torch.device = "cpu") -> CausalLM:
        """Build the model from `config.json` and load `model.safetensors` strictly, by HF names.
        A hybrid checkpoint (qwen3_5) builds the HybridCausalLM (hybrid.py): same forward, other layers."""
        model_class = HybridCausalLM if cls is CausalLM and is_hybrid_checkpoint(path) else cls
        config = model_class.config_class.from_checkpoint(path)
        with torch.device(device):
            model = model_class(config).to(dtype)
        return load_weights(model, path, config.model_type, device)


def load_weights(model: nn.Module, path: str, model_type: str, device: str | torch.device = "cpu") -> nn.Module:
    """Copy `model.safetensors` into `model`, strictly by Hugging Face names and shapes."""
    tensors = load_file(str(Path(path) / "model.safetensors"), device=str(device))
    parameters = dict(model.named_parameters())
    missing, unexpected = sorted(parameters.keys() - tensors.keys()), sorted(tensors.keys() - parameters.keys())
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {path} does not match the {model_type} reference model: "
            f"missing {missing}, unexpected {unexpected}"
        )
    wrong_shape = {n: (tuple(t.shape), tuple(parameters[n].shape)) for n, t in tensors.items() if t.shape != parameters[n].shape}
    if wrong_shape:
        raise ValueError(f"checkpoint {path}: shapes (checkpoint, model) differ for {wrong_shape}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            parameters[name].copy_(tensor)
    return model
