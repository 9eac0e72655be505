"""Seeded weights for a family, written as a Hugging Face checkpoint (config.json + safetensors).

Parameter names and shapes come from transformers' own model class built on the meta device, so
the checkpoint loads with `AutoModelForCausalLM.from_pretrained` like any other. Each tensor is
drawn from its own generator seeded by (seed, name), so adding a parameter never changes the
others. Norm weights (a vision block's norm1/norm2 and its merger's ln_q too) are drawn around 1 (not exactly 1) so that a norm an engine forgets to load
shows up; projections (and the vision tower's patch convolution) are scaled 1/sqrt(fan_in) so
activations stay O(1) in every layer.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zlib
from pathlib import Path

import torch
from safetensors.torch import save_file

from packcheck.harness.models.families import get_family

CHECKPOINT_FORMAT = 1

# GatedDeltaNet decays its state by exp(g) per token, g = -exp(A_log) * softplus(a_t + dt_bias).
# Seeded like a projection, exp(g) would be ~0.5 and a state carried across a document boundary
# would vanish within a few tokens, hiding the leak (BUGS.md: linear-attn-state-leak). These keep
# exp(g) in ~[0.98, 1) for O(1) inputs, so whatever a document leaves in the state is still there
# many tokens later.
SLOW_DECAY = {"A_log": math.log(0.02), "dt_bias": -4.0}


def cache_dir() -> Path:
    return Path(os.environ.get("PACKCHECK_CACHE_DIR", Path.home() / ".cache" / "packcheck")) / "checkpoints"


def _hf_classes(family_name: str):
    import transformers

    family = get_family(family_name)
    return getattr(transformers, family.config_class), getattr(transformers, family.model_class)


def parameter_shapes(family_name: str, config: dict) -> dict[str, tuple[int, ...]]:
    config_cls, model_cls = _hf_classes(family_name)
    hf_config = config_cls(**{k: v for k, v in config.items() if k != "model_type"})
    with torch.device("meta"):
        model = model_cls(hf_config)
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def seeded_tensor(name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(zlib.crc32(f"{seed}:{name}".encode()))
    values = torch.randn(shape, generator=generator, dtype=torch.float64)
    if name.endswith("A_log") or name.endswith("dt_bias"):  # linear-attention decay, see SLOW_DECAY
        return SLOW_DECAY[name.rsplit(".", 1)[-1]] + 0.1 * values
    if name.endswith(("norm.weight", "norm1.weight", "norm2.weight", "ln_q.weight")):
        return 1.0 + 0.1 * values
    if name.endswith(".bias"):
        return 0.1 * values
    if name.endswith("embed_tokens.weight"):
        return values
    fan_in = math.prod(shape[1:]) if len(shape) == 5 else shape[-1]  # a Conv3d (a vision patch embedding): in * kernel
    return values / fan_in**0.5


def write_checkpoint(family_name: str, config: dict, seed: int, directory: Path) -> Path:
    config_cls, model_cls = _hf_classes(family_name)
    shapes = parameter_shapes(family_name, config)
    tensors = {name: seeded_tensor(name, shape, seed).to(torch.float32) for name, shape in shapes.items()}
    directory.mkdir(parents=True, exist_ok=True)
    hf_config = config_cls(**{k: v for k, v in config.items() if k != "model_type"})
    hf_config.architectures = [model_cls.__name__]
    hf_config.save_pretrained(directory)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt", "packcheck_seed": str(seed)})
    return directory


def checkpoint_for(family_name: str, config: dict, seed: int) -> str:
    """The path of the checkpoint for (family, config, seed), written once into the cache."""
    key = zlib.crc32(json.dumps([CHECKPOINT_FORMAT, family_name, config, seed], sort_keys=True).encode())
    target = cache_dir() / f"{family_name}-{seed}-{key:08x}"
    if not (target / "model.safetensors").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
        write_checkpoint(family_name, config, seed, scratch)
        try:
            scratch.rename(target)
        except OSError:  # another process wrote it first; theirs is identical
            pass
    return str(target)
