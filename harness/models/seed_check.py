"""A cached checkpoint checked against its seed: what the harness draws from (family, config, seed, weights) itself,
never digests recorded on disk, which any process of the user (an engine's included) can write. A run that finds an
entry it did not write itself checks it here once (harness/models/checkpoint.py), then holds its digests in memory.

    differs_from_seed(entry, built)   # None, or a sentence naming the file or tensor that differs; `built`: what a build
                                      # from the seed writes (checkpoint.py's Build: config, files, shapes, metadata, draw)

One tensor at a time: each is drawn from its own generator seeded by (seed, name) (checkpoint.py), read from the entry
and compared bit for bit, so memory stays one tensor and nothing is written. Cost: drawing every value once more and
reading the file once: under a tenth of a second at the tiny size; at 0.6b about as long as building the entry (its
float32 draws), at 8B one draw on the GPU and one read of 16 GB.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

WRITER_KEYS = ("transformers_version",)  # config.json says which transformers wrote it: not part of the model


@dataclass(frozen=True, kw_only=True, slots=True)
class Build:
    """What a build of the entry from its seed writes, without writing it."""

    config: dict  # config.json, parsed
    files: tuple[str, ...]  # every file name of the entry
    shapes: dict[str, tuple[int, ...]]
    metadata: dict[str, str]  # model.safetensors' metadata
    draw: Callable[[str, tuple[int, ...]], torch.Tensor]  # a tensor's values, as stored


def differs_from_seed(entry: Path, built: Build) -> str | None:
    want_config, shapes = built.config, built.shapes
    found_files = sorted(p.name for p in entry.iterdir())
    if found_files != sorted(built.files):
        return f"{entry} holds {found_files}, a build from its seed writes {sorted(built.files)}"
    try:
        found_config = json.loads((entry / "config.json").read_text())
    except (OSError, ValueError, RecursionError) as err:
        return f"{entry / 'config.json'} cannot be read ({err})"
    if not isinstance(found_config, dict) or _model_keys(found_config) != _model_keys(want_config):
        return f"{entry / 'config.json'} is not the config a build from its seed writes"
    try:
        with safe_open(str(entry / "model.safetensors"), framework="pt") as f:
            if sorted(f.keys()) != sorted(shapes):
                return f"{entry / 'model.safetensors'} holds other tensors than a build from its seed"
            if (f.metadata() or {}) != built.metadata:
                return f"{entry / 'model.safetensors'} carries other metadata than a build from its seed"
            for name, shape in shapes.items():
                found, want = f.get_tensor(name), built.draw(name, shape)
                if found.dtype != want.dtype or found.shape != want.shape or not found.equal(want):
                    return f"{entry / 'model.safetensors'}: {name} is not the tensor its seed draws"
    except (OSError, RuntimeError, ValueError) as err:  # not a safetensors file (anymore)
        return f"{entry / 'model.safetensors'} cannot be read as safetensors ({err})"
    return None


def _model_keys(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in WRITER_KEYS}
