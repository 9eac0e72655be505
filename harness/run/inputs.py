"""What a run feeds every scenario: the model (`--model`: a size preset or a config directory), the seed of
every generated input (`--seed`) and how much longer documents and rows are (`--data-scale`).

The defaults (tiny, seed 0, scale 1) build today's cases, digest for digest, so the goldens stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass

from packcheck.harness.models.sizes import TINY, resolve_model
from packcheck.harness.scenarios import Setting


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs:
    model: str = TINY  # a size preset of the family (tiny, 0.6b, 1b) or a directory holding a config.json
    seed: int = 0  # 0: today's samples and weights; any other varies every generated input
    data_scale: int | None = None  # None: the model's own (1 for tiny, a 4k row for the realistic presets)

    def setting(self, family: str, dtype: str, device: str, attention: str = "auto") -> Setting:
        choice = resolve_model(family, self.model, self.seed)
        return Setting(family=family, dtype=dtype, device=device, attention=attention, model=choice.spec, seed=self.seed,
                       data_scale=self.data_scale or choice.data_scale, model_name=choice.name)

    def flags(self) -> str:
        """The command-line flags that reproduce these inputs ("" for the defaults)."""
        return "".join([f" --model {self.model}" if self.model != TINY else "", f" --seed {self.seed}" if self.seed else "",
                        f" --data-scale {self.data_scale}" if self.data_scale else ""])

    def to_json(self) -> dict:
        return {"model": self.model, "seed": self.seed} | ({"data_scale": self.data_scale} if self.data_scale else {})
