"""Seeded weights for a family, written as a Hugging Face checkpoint (config.json + safetensors).

Parameter names and shapes come from transformers' own model class built on the meta device, so
the checkpoint loads with `AutoModelForCausalLM.from_pretrained` like any other. Each tensor is
drawn from its own generator seeded by (seed, name), so adding a parameter never changes the
others. Norm weights (a vision block's norm1/norm2 and its merger's ln_q too) are drawn around 1 (not exactly 1) so that a norm an engine forgets to load
shows up; projections (and the vision tower's patch convolution) are scaled 1/sqrt(fan_in) so
activations stay O(1) in every layer.

Two formats (WEIGHTS): float32, drawn by torch's CPU generator (every tiny, 0.6b and 1b checkpoint, the goldens'); and
bfloat16, drawn by portable_normal.py on a GPU where one is visible (the same bits as on a CPU), for the 8b presets:
8B float32 values are 32 GB on the disk and take minutes to draw on a CPU. The format is part of the cache key
(float32 keys are as they always were).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import tempfile
import zlib
from pathlib import Path

import torch
from safetensors.torch import save_file

from packcheck.harness.models.cache_seal import copy_hashed, digests, expected, hashed, mismatch, record
from packcheck.harness.models.cache_seal import pin as pin_digests
from packcheck.harness.models.cache_seal import unpin as unpin_digests
from packcheck.harness.models.families import get_family
from packcheck.harness.models.portable_normal import portable_normal
from packcheck.harness.models.seed_check import Build, differs_from_seed
from packcheck.harness.models.vouch import accept_vouched
from packcheck.harness.models.weight_formats import FLOAT32, WEIGHTS

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


def parameter_count(checkpoint: str | Path) -> int:
    """Elements in the checkpoint's safetensors files, from their headers (nothing is loaded)."""
    total = 0
    for path in sorted(Path(checkpoint).glob("*.safetensors")):
        with open(path, "rb") as file:
            (length,) = struct.unpack("<Q", file.read(8))
            header = json.loads(file.read(length))
        for name, entry in header.items():
            if name != "__metadata__":
                count = 1
                for size in entry["shape"]:
                    count *= size
                total += count
    return total


def seeded_tensor(name: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """The float32 checkpoints' values of `name` (float64): torch's CPU generator seeded by (seed, name)."""
    generator = torch.Generator().manual_seed(zlib.crc32(f"{seed}:{name}".encode()))
    return scaled(name, shape, torch.randn(shape, generator=generator, dtype=torch.float64))


def portable_tensor(name: str, shape: tuple[int, ...], seed: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """The bfloat16 checkpoints' values of `name` (float64 on `device`): the same bits on every device
    (harness/models/portable_normal.py), so a GPU draws 8B of them in seconds and a CPU would draw the same."""
    values = portable_normal(zlib.crc32(f"{seed}:{name}".encode()), math.prod(shape), device).view(shape)
    return scaled(name, shape, values)


def scaled(name: str, shape: tuple[int, ...], values: torch.Tensor) -> torch.Tensor:
    """Standard-normal `values` (float64) placed where a parameter called `name` lives (the module docstring)."""
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


def generation_device() -> str:
    """Where portable weights are drawn: a GPU when one is visible (the same bits as the CPU's, much sooner)."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def write_checkpoint(family_name: str, config: dict, seed: int, directory: Path, weights: str = FLOAT32) -> Path:
    """config.json and model.safetensors of the seeded model in `directory`; `weights` is the format (WEIGHTS)."""
    if weights not in WEIGHTS:
        raise ValueError(f"checkpoint weights {weights!r}: the formats are {', '.join(WEIGHTS)}")
    shapes = parameter_shapes(family_name, config)
    device = "cpu" if weights == FLOAT32 else generation_device()
    tensors = {name: drawn_tensor(name, shape, seed, weights, device) for name, shape in shapes.items()}
    if device == "cuda":
        torch.cuda.empty_cache()  # the harness's process keeps the GPU for the results it compares
    directory.mkdir(parents=True, exist_ok=True)
    write_config(family_name, config, directory)
    save_file(tensors, str(directory / "model.safetensors"), metadata=weights_metadata(seed, weights))
    return directory


def drawn_tensor(name: str, shape: tuple[int, ...], seed: int, weights: str, device: str = "cpu") -> torch.Tensor:
    """The values of `name` as a checkpoint of format `weights` stores them (on the CPU)."""
    if weights == FLOAT32:
        return seeded_tensor(name, shape, seed).to(torch.float32)
    # float64 -> float32 -> bfloat16: each cast correctly rounded on every device, so the bits do not depend on it
    return portable_tensor(name, shape, seed, device).to(torch.float32).to(torch.bfloat16).cpu()


def write_config(family_name: str, config: dict, directory: Path) -> list[str]:
    """The checkpoint's config.json (transformers' own writer); the names of the files written."""
    config_cls, model_cls = _hf_classes(family_name)
    hf_config = config_cls(**{k: v for k, v in config.items() if k != "model_type"})
    hf_config.architectures = [model_cls.__name__]
    hf_config.save_pretrained(directory)
    return sorted(p.name for p in Path(directory).iterdir() if p.name != "model.safetensors")


def weights_metadata(seed: int, weights: str) -> dict[str, str]:
    return {"format": "pt", "packcheck_seed": str(seed)} | ({} if weights == FLOAT32 else {"packcheck_weights": weights})


_recipes: dict[str, tuple[str, dict, int, str]] = {}  # cache entry -> (family, config, seed, weights) it is built from, in this process
_repairs: list[str] = []  # entries rebuilt since the last take_repairs, one sentence each


def checkpoint_path(family_name: str, config: dict, seed: int, weights: str = FLOAT32) -> Path:
    """Where the cache keeps the checkpoint of (family, config, seed, weights), written or not (nothing is built)."""
    recipe = [CHECKPOINT_FORMAT, family_name, config, seed] + ([] if weights == FLOAT32 else [weights])  # float32 keys as before
    key = zlib.crc32(json.dumps(recipe, sort_keys=True).encode())
    return cache_dir() / f"{family_name}-{seed}-{key:08x}"


def checkpoint_for(family_name: str, config: dict, seed: int, weights: str = FLOAT32) -> str:
    """The path of the checkpoint for (family, config, seed), written once into the cache, its digests recorded beside
    it; an entry whose files no longer match them (harness/models/cache_seal.py) is named and rebuilt from its seed.
    `weights`: how the values are drawn and stored (WEIGHTS)."""
    target = checkpoint_path(family_name, config, seed, weights)
    _recipes[str(target)] = (family_name, json.loads(json.dumps(config)), seed, weights)  # as keyed: a caller may change its dict later
    if not (target / "model.safetensors").exists():
        _build(target)
    elif expected(target) is None:  # not written by this process: vouched for by its parent (harness/models/vouch.py), or
        if not accept_vouched(target):  # checked against its seed; never against digests on disk
            _verify(target)
    elif (problem := mismatch(target, target)) is not None:
        repair_checkpoint(str(target), problem)
    return str(target)


def checkpoint_problem(folder: Path, source: str) -> str | None:
    """None when `folder` (a copy of the cache entry `source`) holds the entry's files as recorded, else what differs;
    None too for a checkpoint that is not a cache entry of this process (a user's own weights: nothing to check)."""
    if source not in _recipes:
        return None
    return mismatch(folder, Path(source))


def copy_checkpoint(source: str, target: Path) -> None:
    """Copy the checkpoint `source` to the new folder `target`: a cache entry hashed as it is copied (cache_seal.copy_hashed),
    so that checkpoint_problem(target, source) then costs no second pass; anything else copied as it is."""
    if source in _recipes and all(p.is_file() for p in Path(source).iterdir()):
        copy_hashed(Path(source), target)
    else:
        shutil.copytree(source, target)


def repair_checkpoint(source: str, problem: str) -> None:
    """Rebuild the cache entry `source` from its seed (it did not match its digests: `problem`), and say so."""
    target = Path(source)
    _rebuild(target)
    _repairs.append(f"the cached checkpoint {target} is not the one written from its seed: {problem}; "
                    "it was rebuilt from its seed, and every arm ran from the rebuilt one")


def take_repairs() -> list[str]:
    """The cache entries rebuilt since the last call, one sentence each."""
    taken = list(_repairs)
    _repairs.clear()
    return taken


def pin_cache() -> None:
    """Hold the cache's recorded digests for the run (harness/models/cache_seal.py): before any engine process exists."""
    pin_digests(cache_dir())


def unpin_cache() -> list[str]:
    """Release the hold; every entry the run used that changed during it is rebuilt. One sentence per repair of the run."""
    for entry, problem in unpin_digests():
        if str(entry) in _recipes:
            repair_checkpoint(str(entry), problem)
    return take_repairs()


def _verify(target: Path) -> None:
    """Hold digests for an entry this process did not write, after checking it against its seed (seed_check.py): any
    process of the user can write the cache and the digests recorded beside it, so neither vouches for it. The entry is
    left in place when it matches (another run may be copying it); a mismatch is a repair."""
    family_name, config, seed, weights = _recipes[str(target)]
    with tempfile.TemporaryDirectory(prefix="packcheck-config-") as scratch:
        files = write_config(family_name, config, Path(scratch))
        want_config = json.loads((Path(scratch) / "config.json").read_text())
    device = "cpu" if weights == FLOAT32 else generation_device()
    built = Build(config=want_config, files=(*files, "model.safetensors"), shapes=parameter_shapes(family_name, config),
                  metadata=weights_metadata(seed, weights), draw=lambda name, shape: drawn_tensor(name, shape, seed, weights, device))
    found, stats = hashed(target)
    if (problem := differs_from_seed(target, built)) is None:
        record(target, found, stats)
    else:
        repair_checkpoint(str(target), problem)


def _rebuild(target: Path) -> None:
    damaged = target.with_name(f".damaged-{target.name}-{os.getpid()}")
    try:
        os.replace(target, damaged)
    except OSError:
        pass
    _build(target)
    shutil.rmtree(damaged, ignore_errors=True)


def _build(target: Path) -> None:
    family_name, config, seed, weights = _recipes[str(target)]
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    write_checkpoint(family_name, config, seed, scratch, weights)
    found, stats = hashed(scratch)
    try:
        scratch.rename(target)
    except OSError:  # another process wrote it first; theirs is identical
        shutil.rmtree(scratch, ignore_errors=True)
        stats = None
    record(target, found, stats)
