"""The model of a Case: a family, its tiny HF config, and a seeded HF-format checkpoint.

`checkpoint` is a directory holding `config.json` and `model.safetensors` with Hugging Face
parameter names; every engine loads it the way it loads any checkpoint, so all engines start
from identical weights. `packcheck.harness.models` writes it from (family, config, seed).

`frozen`: name prefixes of the parameters that do not train (a vision-language model's vision
tower by default): no gradient, not in the optimizer, bit-identical after a step. Engines report
gradients for the other parameters only. Absent from the JSON when empty.
"""

from __future__ import annotations

import dataclasses

import json
from dataclasses import dataclass, field

from packcheck.harness.contract.images import VisionSpec


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    family: str
    config: dict = field(hash=False)
    seed: int
    checkpoint: str
    frozen: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "frozen", tuple(self.frozen))

    def is_frozen(self, name: str) -> bool:
        return name.startswith(self.frozen) if self.frozen else False

    @property
    def vision(self) -> VisionSpec | None:
        """The image placeholder token and patch geometry, for a model with a vision tower."""
        return VisionSpec.from_config(self.config)

    @property
    def vocab_size(self) -> int:
        return int(self.config["vocab_size"])

    def with_checkpoint(self, checkpoint: str) -> ModelSpec:
        """The same model from another copy of its checkpoint (each arm gets its own)."""
        return dataclasses.replace(self, checkpoint=checkpoint)

    def to_json(self) -> dict:
        data = {"family": self.family, "config": self.config, "seed": self.seed, "checkpoint": self.checkpoint}
        return data | ({"frozen": list(self.frozen)} if self.frozen else {})

    @classmethod
    def from_json(cls, data: dict) -> ModelSpec:
        return cls(**data)

    def config_digest(self) -> str:
        return json.dumps(self.config, sort_keys=True)
