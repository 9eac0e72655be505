"""What a run feeds every scenario: the model (`--model`: a size preset or a config directory), the seed of
every generated input (`--seed`) and how much longer documents and rows are (`--data-scale`).

The defaults (tiny, seed 0, scale 1) build today's cases, digest for digest, so the goldens stay valid.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from packcheck.harness.data.smaller import Smaller
from packcheck.harness.errors import InputError
from packcheck.harness.models.sizes import PRESETS, TINY, is_path, read_config, resolve_model
from packcheck.harness.models.smaller import smaller_model
from packcheck.harness.scenarios import Setting


class BadInputs(InputError):
    """--model, --seed or --data-scale that no run can take: the message names the flag and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs:
    model: str = TINY  # a size preset of the family (tiny, flat, deep, 0.6b, 1b, 8b) or a directory holding a config.json
    seed: int = 0  # 0: today's samples and weights; any other varies every generated input
    data_scale: int | None = None  # None: the model's own (1 for tiny, a 4k row for the realistic presets)
    smaller: Smaller | None = None  # the scenarios' inputs made smaller (harness/shrink): no flag gives it, a shrunk case's file does

    def setting(self, family: str, dtype: str, device: str, attention: str = "auto") -> Setting:
        choice = resolve_model(family, self.model, self.seed)
        model = choice.spec if self.smaller is None else smaller_model(choice.spec, self.smaller)
        return Setting(family=family, dtype=dtype, device=device, attention=attention, model=model, seed=self.seed,
                       data_scale=self.data_scale or choice.data_scale, model_name=choice.name, smaller=self.smaller)

    def flags(self) -> str:
        """The command-line flags that reproduce these inputs ("" for the defaults), safe to paste into a shell from any
        directory: a config directory absolute and quoted (a reproduce command may start with a `cd`)."""
        model = shlex.quote(os.path.abspath(self.model) if is_path(self.model) else self.model)
        return "".join([f" --model {model}" if self.model != TINY else "", f" --seed {self.seed}" if self.seed else "",
                        f" --data-scale {self.data_scale}" if self.data_scale else ""])

    def to_json(self) -> dict:
        return ({"model": self.model, "seed": self.seed} | ({"data_scale": self.data_scale} if self.data_scale else {})
                | ({"smaller": self.smaller.to_json()} if self.smaller is not None else {}))


def checked_inputs(model: str, seed: int, data_scale: int | None, families: list[str] | None) -> tuple[Inputs, list[str] | None]:
    """--model, --seed and --data-scale as a run's Inputs, and the families they fit: a config directory runs its own
    family, a size preset the families that have it (`families`, the --family given, may narrow them, never widen
    them; None with the tiny default: every family). Shared by `packcheck run` and the pytest plugin."""
    if seed < 0:
        raise BadInputs(f"--seed {seed}: give a seed of 0 or more (0: the goldens' inputs)")
    if data_scale is not None and (data_scale < 1 or data_scale % 2 == 0):
        raise BadInputs(f"--data-scale {data_scale}: give an odd positive number (an even one makes cp's indivisible row divisible)")
    if is_path(model):
        family = read_config(model)[0]
        if families and families != [family]:
            raise BadInputs(f"--model {model} is a {family!r} model; run it with --family {family} (or without --family)")
        families = [family]
    elif model != TINY:
        having = [family for family, presets in PRESETS.items() if model in presets]
        lacking = [family for family in families or having if model not in PRESETS.get(family, {})]
        if not having or lacking:
            which = f"{', '.join(lacking)} has no such size preset" if having else "no family has such a size preset"
            raise BadInputs(f"--model {model}: {which}; "
                            + "; ".join(f"{family}: {', '.join(presets)}" for family, presets in PRESETS.items())
                            + "; or give a directory holding a Hugging Face config.json")
        families = families or having
    return Inputs(model=model, seed=seed, data_scale=data_scale), families
