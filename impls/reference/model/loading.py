"""The reference model for a checkpoint: the dense CausalLM or the vision-language model, by its
config's model_type."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from packcheck.impls.reference.model.causal_lm import CausalLM
from packcheck.impls.reference.model.vlm import VisionLanguageLM
from packcheck.impls.reference.model.vlm_config import VLM_MODEL_TYPES


def load_model(path: str, dtype: torch.dtype, device: str | torch.device = "cpu") -> nn.Module:
    model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type")
    model_class = VisionLanguageLM if model_type in VLM_MODEL_TYPES else CausalLM
    return model_class.from_checkpoint(path, dtype, device)
