"""A family's config with fewer layers, fewer attention heads or a narrower MLP, where the family allows it: what the
shrinker (harness/shrink) tries once a failure is small in data.

Layers: every family (a hybrid's `layer_types` and an MoE's `mlp_only_layers` cut alike; a vision-language
model's text decoder, whose count the top level mirrors). Heads and width: the dense families, whose attention
and MLP are plain (`NARROWABLE`): the head size is kept, so fewer heads is a narrower attention, not another one;
key-value heads stay a divisor of the query heads. Weights are seeded per parameter name
(harness/models/checkpoint.py), so a smaller model keeps the weights of the layers and heads it keeps.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from packcheck.harness.contract import ModelSpec
from packcheck.harness.errors import InputError
from packcheck.harness.models.checkpoint import cache_dir, checkpoint_for

NARROWABLE = frozenset({"llama", "qwen3"})  # families whose heads and MLP width may be cut


class NotSmaller(InputError):
    """A change the family's config cannot take: the message names the field."""


def seeded(model: ModelSpec) -> bool:
    """Whether the model's weights are packcheck's, written from its seed (not a checkpoint of the user's): only those
    can be made smaller."""
    return Path(model.checkpoint).parent == cache_dir()


def smaller_model(model: ModelSpec, smaller) -> ModelSpec:
    """`model` with the layers, heads and width of `smaller` (harness/data/smaller.py), its weights from the same seed."""
    changes = smaller.model_changes
    if not changes:
        return model
    if not seeded(model):
        raise NotSmaller(f"smaller.{next(iter(changes))}: the model's weights are a checkpoint of yours ({model.checkpoint}); "
                         "packcheck makes smaller models only of weights it writes from a seed: leave the model's numbers out")
    config = smaller_config(model.family, model.config, **changes)
    return dataclasses.replace(model, config=config, checkpoint=checkpoint_for(model.family, config, model.seed))


def layer_count(config: dict) -> int:
    return int((config.get("text_config") or config)["num_hidden_layers"])


def head_counts(family: str, config: dict) -> list[int]:
    """The attention head counts a smaller model may have (those that divide the width, as transformers requires), the
    model's own last; [] where the family's heads are not cut."""
    if family not in NARROWABLE:
        return []
    return [n for n in range(1, int(config["num_attention_heads"]) + 1) if int(config["hidden_size"]) % n == 0]


def mlp_width(family: str, config: dict) -> int | None:
    return int(config["intermediate_size"]) if family in NARROWABLE else None


def smaller_config(family: str, config: dict, layers: int | None = None, heads: int | None = None, width: int | None = None) -> dict:
    """`config` with at most `layers` layers, `heads` attention heads and an MLP `width` wide (None: as it is)."""
    config = dict(config)
    if layers is not None and layers < layer_count(config):
        config = _fewer_layers(config, layers)
    if heads is not None:
        config = _fewer_heads(family, config, heads)
    if width is not None and width < (mlp_width(family, config) or width):
        config["intermediate_size"] = width
    elif width is not None and mlp_width(family, config) is None:
        raise NotSmaller(f"smaller.width: the {family} family's MLP width is not cut (only {', '.join(sorted(NARROWABLE))})")
    return config


def _fewer_heads(family: str, config: dict, heads: int) -> dict:
    """At most `heads` attention heads of the model's head size; key-value heads the most that divide them."""
    counts = head_counts(family, config)
    if counts and heads >= counts[-1]:
        return config
    if heads not in counts:
        raise NotSmaller(f"smaller.heads {heads}: a {family} model of this width takes {counts or 'no other number of'} heads")
    original = int(config["num_attention_heads"])
    kv = min(int(config.get("num_key_value_heads", original)), heads)
    while heads % kv:
        kv -= 1
    return config | {"head_dim": int(config.get("head_dim") or config["hidden_size"] // original), "num_attention_heads": heads,
                     "num_key_value_heads": kv}


def _fewer_layers(config: dict, layers: int) -> dict:
    if "text_config" in config:  # a vision-language model: its decoder's count, mirrored at the top level
        return config | {"num_hidden_layers": layers, "text_config": _fewer_layers(config["text_config"], layers)}
    config = config | {"num_hidden_layers": layers}
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:layers]
    if isinstance(config.get("mlp_only_layers"), list):
        config["mlp_only_layers"] = [i for i in config["mlp_only_layers"] if i < layers]
    return config
