"""The model of a Case: a family, its tiny HF config, and a seeded HF-format checkpoint.

`checkpoint` is a directory holding `config.json` and `model.safetensors` with Hugging Face
parameter names; every engine loads it the way it loads any checkpoint, so all engines start
from identical weights. `packcheck.harness.models` writes it from (family, config, seed).
"""

from __future__ import annotations

import dataclasses

import json
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    family: str
    config: dict = field(hash=False)
    seed: int
    checkpoint: str

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])

    def with_checkpoint(self, checkpoint: str) -> ModelSpec:
        """The same model from another copy of its checkpoint (each arm gets its own)."""
        return dataclasses.replace(self, checkpoint=checkpoint)

    def to_json(self) -> dict:
        return {"family": self.family, "config": self.config, "seed": self.seed, "checkpoint": self.checkpoint}

    @classmethod
    def from_json(cls, data: dict) -> ModelSpec:
        return cls(**data)

    def config_digest(self) -> str:
        return json.dumps(self.config, sort_keys=True)
