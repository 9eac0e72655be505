"""Model sizes a run names with `--model`: a family's size preset, or a Hugging Face config / checkpoint directory.

    resolve_model("llama", "tiny")           # today's tiny config (the default; goldens exist for it alone)
    resolve_model("qwen3", "0.6b")           # Qwen3-0.6B's shapes, weights seeded
    resolve_model("qwen3", "/path/to/dir")   # a directory with config.json: its safetensors if any, else seeded weights

The presets copy the shapes of released models (their config.json), with two deliberate
differences: word embeddings stay untied (the tiny configs' choice: every gradient tensor, the
lm_head's too, is compared on its own) and RoPE is the default rotation (the reference model
implements only that; Llama-3.2's `llama3` frequency scaling is left out). `data_scale` is how
much longer the scenarios' documents and rows become at that size (harness/data/samples.py,
`scaled`): odd, so a row length that cp does not divide stays indivisible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from packcheck.harness.contract import ModelSpec
from packcheck.harness.errors import InputError
from packcheck.harness.models.config_check import config_problem
from packcheck.harness.models.families import FAMILIES, get_family
from packcheck.harness.models.weight_formats import FLOAT32

TINY = "tiny"

# Qwen3-0.6B (hidden 1024, 28 layers, 16 query / 8 key-value heads of 128, vocab 151936)
QWEN3_0_6B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                  num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
# Qwen3-1.7B (hidden 2048, 28 layers, 16 / 8 heads of 128): the 1B class of the Qwen3 family
QWEN3_1_7B = {**QWEN3_0_6B, "hidden_size": 2048, "intermediate_size": 6144}
# Llama-3.2-1B (hidden 2048, 16 layers, 32 / 8 heads of 64, vocab 128256)
LLAMA_3_2_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                    num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 500000.0})

# The tiny config with a large vocabulary: a seeded model's logits spread by about 1 whatever its size, so its log-probs
# sit near -ln(vocab) - 0.5 (-10.2 here, -12.4 at 0.6b's 151,936), in the same bfloat16 binade [8, 16) where one spacing
# is 0.0625 nats: the rounding a 0.6b or 8B bf16 run shows, on the CPU in seconds (tests/test_flat_output_bf16.py).
FLAT = dict(vocab_size=16384)
# ... and 16 layers deep: bf16 gradient rounding that the layout changes, amplified through the layers, reaches the
# calibrated table's gradient bound (measured on 2 layers) as at 0.6b's 28 (docs/margins.md, "Gradients: a null measured
# in the run"; tests/test_gradient_null.py)
DEEP = FLAT | dict(num_hidden_layers=16)

# Llama-3-8B (hidden 4096, intermediate 14336, 32 layers, 32 / 8 heads of 128, vocab 128256, RoPE theta 5e5)
LLAMA_3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, max_position_embeddings=8192, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
# Qwen3-8B (hidden 4096, intermediate 12288, 36 layers, 32 / 8 heads of 128, vocab 151936, RoPE theta 1e6, rms eps 1e-6)
QWEN3_8B = {**QWEN3_0_6B, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32}
# 8B parameters in float32 are 32 GB on the disk, and a run holds the cache entry and a launch's private copy of it:
# these presets store bfloat16 weights (16 GB), drawn on the GPU (harness/models/portable_normal.py)
LARGE_WEIGHTS = "bfloat16"

# 48-token rows become 48 * 85 = 4080 tokens: a realistic 4k row. `--data-scale 683` gives 32784-token rows.
REALISTIC_SCALE = 85


@dataclass(frozen=True, kw_only=True, slots=True)
class SizePreset:
    name: str
    description: str
    overrides: dict = field(hash=False)
    data_scale: int = 1
    weights: str = FLOAT32  # how the checkpoint's values are drawn and stored (harness/models/checkpoint.py, WEIGHTS)


PRESETS: dict[str, dict[str, SizePreset]] = {family: {TINY: SizePreset(name=TINY, description="the family's tiny config", overrides={})}
                                             for family in FAMILIES}
FLAT_PRESET = SizePreset(name="flat", description="the tiny config with a 16,384-token vocabulary: log-probs near -10 (bf16 spacing 0.0625, as at 0.6b and 8b)",
                         overrides=FLAT)
DEEP_PRESET = SizePreset(name="deep", description="the flat preset 16 layers deep: bf16 gradient rounding near the table's bound, as at 0.6b",
                         overrides=DEEP)
PRESETS["llama"] |= {
    "flat": FLAT_PRESET,
    "deep": DEEP_PRESET,
    "0.6b": SizePreset(name="0.6b", description="Llama layout at Qwen3-0.6B's shapes", overrides=QWEN3_0_6B, data_scale=REALISTIC_SCALE),
    "1b": SizePreset(name="1b", description="Llama-3.2-1B's shapes", overrides=LLAMA_3_2_1B, data_scale=REALISTIC_SCALE),
    "8b": SizePreset(name="8b", description="Llama-3-8B's shapes", overrides=LLAMA_3_8B, data_scale=REALISTIC_SCALE, weights=LARGE_WEIGHTS),
}
PRESETS["qwen3"] |= {
    "flat": FLAT_PRESET,
    "deep": DEEP_PRESET,
    "0.6b": SizePreset(name="0.6b", description="Qwen3-0.6B's shapes", overrides=QWEN3_0_6B, data_scale=REALISTIC_SCALE),
    "1b": SizePreset(name="1b", description="Qwen3-1.7B's shapes (the family's 1B class)", overrides=QWEN3_1_7B, data_scale=REALISTIC_SCALE),
    "8b": SizePreset(name="8b", description="Qwen3-8B's shapes", overrides=QWEN3_8B, data_scale=REALISTIC_SCALE, weights=LARGE_WEIGHTS),
}

# config.json keys that say how a file was written, not what the model is (left out of the case and its digest)
WRITER_KEYS = ("architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path")


class ModelChoiceError(InputError):
    """--model names no preset of the family and no readable config: the message says which are known."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    """A resolved --model: the spec every arm uses and how much the scenarios' data scales with it."""

    spec: ModelSpec
    name: str  # the preset's name, or the directory given
    data_scale: int = 1

    @property
    def is_tiny(self) -> bool:
        return self.name == TINY


def is_path(model: str) -> bool:
    """A config directory or file, not a preset name (a folder named like a preset needs a ./ before it)."""
    presets = {name for sizes in PRESETS.values() for name in sizes}
    return "/" in model or model.endswith(".json") or (model not in presets and Path(model).exists())


def resolve_model(family: str, model: str = TINY, seed: int = 0) -> ModelChoice:
    """The model of `--model` for `family`; `seed` (the run's --seed) varies seeded weights, 0 keeps today's.
    A preset's checkpoint is written into the cache here if it is not there yet (planned_checkpoint says where, first)."""
    from packcheck.harness.models import DEFAULT_SEED
    from packcheck.harness.models.checkpoint import checkpoint_for  # here: it imports torch, which listing the presets does not need

    weights_seed = DEFAULT_SEED + seed
    if is_path(model):
        return from_directory(family, Path(model), weights_seed)
    preset = preset_of(family, model)
    fam = get_family(family)
    config = fam.config(**preset.overrides)
    return ModelChoice(spec=ModelSpec(family=family, config=config, seed=weights_seed, checkpoint=checkpoint_for(family, config, weights_seed, preset.weights),
                                      frozen=fam.frozen), name=model, data_scale=preset.data_scale)


def preset_of(family: str, model: str) -> SizePreset:
    presets = PRESETS.get(family, {})
    if model not in presets:
        raise ModelChoiceError(f"--model {model!r}: family {family!r} has the size presets {', '.join(presets)}; "
                               "or give a directory holding a Hugging Face config.json (and optionally its safetensors)")
    return presets[model]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedCheckpoint:
    """What --model will start every arm from, known before anything is written: for a size estimate."""

    family: str
    config: dict = field(hash=False)
    weights: str  # the format of a seeded checkpoint (harness/models/checkpoint.py, WEIGHTS); a user's own files: theirs
    path: Path  # the cache entry (written or not), or the user's directory
    seeded: bool  # a cache entry the run writes if it is missing (else the user's files)


def planned_checkpoint(family: str, model: str = TINY, seed: int = 0) -> PlannedCheckpoint:
    """resolve_model's checkpoint without writing it."""
    from packcheck.harness.models import DEFAULT_SEED
    from packcheck.harness.models.checkpoint import checkpoint_path

    weights_seed = DEFAULT_SEED + seed
    if is_path(model):
        own, config, folder = read_config(model)
        if any(folder.glob("*.safetensors")):
            return PlannedCheckpoint(family=own, config=config, weights="", path=folder.resolve(), seeded=False)
        return PlannedCheckpoint(family=own, config=config, weights=FLOAT32, path=checkpoint_path(own, config, weights_seed), seeded=True)
    preset = preset_of(family, model)
    config = get_family(family).config(**preset.overrides)
    return PlannedCheckpoint(family=family, config=config, weights=preset.weights,
                             path=checkpoint_path(family, config, weights_seed, preset.weights), seeded=True)


def family_of(config: dict, path: Path) -> str:
    model_type = config.get("model_type")
    matches = [name for name, fam in FAMILIES.items() if fam.tiny_config.get("model_type") == model_type]
    if not matches:
        known = sorted({fam.tiny_config.get("model_type") for fam in FAMILIES.values()})
        raise ModelChoiceError(f"--model {path}: config.json has model_type {model_type!r}; packcheck's families have {', '.join(known)}")
    return matches[0]


def read_config(model: str | Path) -> tuple[str, dict, Path]:
    """(family, config, folder) of a Hugging Face config.json or the directory holding it; the config without its writer's keys."""
    path = Path(model)
    config_file = path if path.suffix == ".json" else path / "config.json"
    if not config_file.is_file():
        raise ModelChoiceError(f"--model {path}: no {config_file.name} there; give a directory holding a Hugging Face config.json "
                               "or a family's size preset")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ModelChoiceError(f"--model {path}: {config_file} is not readable JSON ({err or 'nested too deep'})") from None
    if not isinstance(config, dict):
        raise ModelChoiceError(f"--model {path}: {config_file} holds a {type(config).__name__}, not a config object")
    if (problem := config_problem(config)) is not None:
        raise ModelChoiceError(f"--model {path}: {config_file}: {problem}; fix the field (the released model's config.json has it)")
    config = {k: v for k, v in config.items() if k not in WRITER_KEYS}
    config.setdefault("use_cache", False)
    return family_of(config, path), config, config_file.parent


def from_directory(family: str, path: Path, seed: int) -> ModelChoice:
    """A Hugging Face config.json (or the directory holding it); its safetensors are the weights where present, else seeded."""
    from packcheck.harness.models.checkpoint import checkpoint_for

    own, config, folder = read_config(path)
    if own != family:
        raise ModelChoiceError(f"--model {path} is a {own!r} model (model_type {config.get('model_type')!r}); run it with --family {own}")
    has_weights = any(folder.glob("*.safetensors"))
    checkpoint = str(folder.resolve()) if has_weights else checkpoint_for(family, config, seed)
    return ModelChoice(spec=ModelSpec(family=family, config=config, seed=seed, checkpoint=checkpoint, frozen=get_family(family).frozen),
                       name=str(path))
