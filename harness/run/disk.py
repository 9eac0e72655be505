"""What a run will need on the disk under --out, said before it starts, and a refusal when the disk cannot hold it.

    need = disk_need(families, scenarios, engines, dtype, inputs, save_arms)   # a Need: bytes, and how they were counted
    check_disk(out, need)          # DiskTooSmall (exit 2) if free space < need.bytes; else the line that says the need

What lies under --out while a run goes (harness/launch/tidy.py, private_checkpoint.py): each live launch's copy of
the checkpoint (at most KEEP launches at once, harness/launch/pool.py; in a cuda run only the GPU launches, one per
engine, copy the run's model: the CPU launches run the tiny one); a seeded checkpoint the run writes into the cache
(PACKCHECK_CACHE_DIR) when the cache lies on the same disk (at 8B, 16 GB of bfloat16); the results of the verdict being judged,
every arm's, until the verdict is decided (each scenario's entry says how many: Scenario.disk_arms); and the arms `--save-arms` keeps: none;
for `failing`, one failing verdict's (the largest one's; each further failing verdict keeps its own); for `all`,
every verdict's. A cuda run holds its verdicts' results on the GPU, not here (harness/launch/device_result.py): only
the arms kept count. An arm's result is its gradients: the model's parameter count x the run's element size (an arm
whose ranks outnumber the GPUs runs on the CPU in float64 at the family's tiny size: placement.logic_setting).
FACTOR covers the rest: log-probs, the parameters after an optimizer step, JSON, the launches' logs. At the tiny
size README command 1 needs about 200 MB by this count (its measured peak: 37 MB for one family, docs/performance.md):
the check never refuses a machine that can run packcheck.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.errors import InputError
from packcheck.harness.launch.pool import KEEP
from packcheck.harness.launch.usage import human
from packcheck.harness.models.checkpoint import WEIGHTS, cache_dir, parameter_count, parameter_shapes
from packcheck.harness.models.sizes import planned_checkpoint
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.options import SPOT_ARMS
from packcheck.harness.scenarios import SCENARIOS, Scenario
FACTOR = 1.5
LARGE = 1 << 30  # a run that needs more says so before it starts
ELEMENT_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


class DiskTooSmall(InputError):
    """The disk under --out has less free space than the run's estimate: the message names both and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Need:
    bytes: int
    kept: int  # of which the arms --save-arms keeps
    how: str  # how it was counted, for people


def free_bytes(directory: Path) -> int:
    """Free space under `directory` for this user (statvfs f_bavail)."""
    return shutil.disk_usage(directory).free


def checkpoint_bytes(checkpoint: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(checkpoint).iterdir() if p.is_file())


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointSize:
    params: int
    bytes: int  # its files on the disk, written or to be written
    unwritten: bool  # a cache entry the run will write (a --model preset not yet in the cache)


def checkpoint_size(family: str, inputs: Inputs) -> CheckpointSize:
    """The parameters and bytes of the checkpoint --model starts every arm from, from its files where they exist, else
    from its config and weight format (transformers' model class on the meta device): nothing is written to know it."""
    planned = planned_checkpoint(family, inputs.model, inputs.seed)
    if (planned.path / "model.safetensors").exists():
        return CheckpointSize(params=parameter_count(planned.path), bytes=checkpoint_bytes(planned.path), unwritten=False)
    params = sum(math.prod(shape) for shape in parameter_shapes(planned.family, planned.config).values())
    return CheckpointSize(params=params, bytes=params * WEIGHTS[planned.weights], unwritten=planned.seeded)


def same_disk(a: Path, b: Path) -> bool:
    """Whether `a` and `b` (or the nearest folders above them that exist) lie on one file system."""
    def device(path: Path) -> int:
        path = path.resolve()
        while not path.exists():
            path = path.parent
        return path.stat().st_dev

    return device(a) == device(b)


def arms_of(scenario: Scenario) -> int:
    """The arms with a result in one verdict of `scenario`: as its entry measured them; one not measured (a new scenario,
    or a user's) counts as many as the largest measured. One that judges drawn arms also holds each one's oracle arm and,
    saved, the drawn arm (run/spot_checks.py; at the default --spot-arms)."""
    drawn = 2 * SPOT_ARMS if scenario.takes_spot_arms else 0
    return (scenario.disk_arms or max(s.disk_arms or 0 for s in SCENARIOS.values())) + drawn


def disk_need(families: Sequence[str], scenarios: Sequence[Scenario], engines: int, dtype: str, inputs: Inputs,
              save_arms: str, device: str = "cpu", out: Path | None = None) -> Need:
    """What the run will need under --out at its peak (the module's docstring says how it is counted)."""
    sizes = [checkpoint_size(family, inputs) for family in families]
    params = max(s.params for s in sizes)
    # a cuda run's arms that outnumber the GPUs run at the tiny size: only each engine's GPU launch copies this model
    live = min(KEEP, engines) if device == "cuda" else KEEP
    copies = live * max(s.bytes for s in sizes)
    cache = sum(s.bytes for s in sizes if s.unwritten) if out is None or same_disk(cache_dir(), out) else 0
    element = ELEMENT_BYTES.get(dtype, 8)  # "auto": the largest
    arm = params * element
    most = max(map(arms_of, scenarios))
    largest = 0 if device == "cuda" else most  # a cuda run's results stay on the GPU (harness/launch/device_result.py)
    saved = {"none": 0, "failing": most, "all": engines * len(families) * sum(map(arms_of, scenarios))}[save_arms]
    return Need(bytes=int(FACTOR * (copies + arm * (largest + saved))) + cache, kept=int(FACTOR * arm * saved),
                how=(f"{FACTOR:g} x ({live} checkpoint copies of {human(copies // live)} + {largest} arm results held by the "
                     f"largest verdict{' on the disk (on the GPU in a cuda run)' if device == 'cuda' else ''} + {saved} kept by --save-arms {save_arms}; an arm's result {human(arm)}: "
                     f"{params:,} parameters x {element} bytes)"
                     + (f" + {human(cache)} of seeded checkpoints the run writes into the cache ({cache_dir()})" if cache else "")))


def check_disk(out: Path, need: Need) -> str:
    """Refuse the run (DiskTooSmall) when the disk under `out` cannot hold `need`; else the line that says what it needs."""
    available = free_bytes(out)
    if available < need.bytes:
        fixes = ["point --out at a larger disk"]
        if not need.kept:
            fixes.append("run fewer scenarios at once (--scenario)")
        elif need.bytes - need.kept > available:
            fixes.append("keep no arms with --save-arms none and run fewer scenarios at once (--scenario)")
        else:
            fixes.append("keep no arms with --save-arms none")
        raise DiskTooSmall(f"--out {out}: the disk there has {human(available)} free, and this run needs about "
                           f"{human(need.bytes)} ({need.how}); " + ", or ".join(fixes))
    return f"disk: this run needs about {human(need.bytes)} under {out} ({need.how}); {human(available)} free"
