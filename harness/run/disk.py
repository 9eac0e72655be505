"""What a run will need on the disk under --out, said before it starts, and a refusal when the disk cannot hold it.

    need = disk_need(families, dtype, inputs, save_arms, verdicts)   # a Need: bytes, and how they were counted
    check_disk(out, need)                                            # DiskTooSmall (exit 2) if free space < need.bytes

What lies under --out while a run goes (harness/launch/tidy.py, private_checkpoint.py): each live launch's copy of
the checkpoint (at most KEEP launches at once, harness/launch/pool.py), the one case's result the pool has not yet
read back, and the arms `--save-arms` keeps: none; for `failing`, one failing verdict's arms (the largest verdict's,
ARMS_LARGEST_VERDICT: each further failing verdict keeps about ARMS_PER_VERDICT more); for `all`, every verdict's.
An arm's result is its gradients: the model's parameter count x the run's element size (float64 on the CPU logic
pass of a cuda run). FACTOR covers the rest: log-probs, the parameters after an optimizer step, JSON, the launches'
logs. At the tiny size the need is tens of MB: the check never refuses on a machine that can run packcheck at all.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.errors import InputError
from packcheck.harness.launch.pool import KEEP
from packcheck.harness.launch.usage import human
from packcheck.harness.models.sizes import resolve_model
from packcheck.harness.run.inputs import Inputs

# measured on the default float64 matrix (llama, 2026-12-02): 111 results over 14 verdicts; rl_loss_aggregation has 47 arms
ARMS_PER_VERDICT = 8
ARMS_LARGEST_VERDICT = 48
FACTOR = 1.5
LARGE = 1 << 30  # a run that needs more says so before it starts
ELEMENT_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


class DiskTooSmall(InputError):
    """The disk under --out has less free space than the run's estimate: the message names both and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Need:
    bytes: int
    how: str  # how it was counted, for people


def free_bytes(directory: Path) -> int:
    """Free space under `directory` for this user (statvfs f_bavail)."""
    return shutil.disk_usage(directory).free


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


def checkpoint_bytes(checkpoint: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(checkpoint).iterdir() if p.is_file())


def disk_need(families: Sequence[str], dtype: str, device: str, inputs: Inputs, save_arms: str, verdicts: int) -> Need:
    """What the run will need under --out at its peak (the module's docstring says how it is counted)."""
    checkpoints = [resolve_model(family, inputs.model, inputs.seed).spec.checkpoint for family in families]
    params = max(parameter_count(c) for c in checkpoints)
    copies = KEEP * max(checkpoint_bytes(c) for c in checkpoints)
    element = 8 if device == "cuda" else ELEMENT_BYTES.get(dtype, 8)  # a cuda run's CPU pass is float64; "auto": the largest
    arm = params * element
    saved = {"none": 0, "failing": ARMS_LARGEST_VERDICT, "all": max(ARMS_LARGEST_VERDICT, ARMS_PER_VERDICT * verdicts)}[save_arms]
    need = int(FACTOR * (copies + arm * (1 + saved)))
    return Need(bytes=need, how=(f"{FACTOR:g} x ({KEEP} checkpoint copies of {human(copies // KEEP)} + {1 + saved} arm results "
                                 f"of {human(arm)}: {params:,} parameters x {element} bytes; --save-arms {save_arms} keeps {saved})"))


def check_disk(out: Path, need: Need) -> str:
    """Refuse the run (DiskTooSmall) when the disk under `out` cannot hold `need`; else the line that says what it needs."""
    available = free_bytes(out)
    if available < need.bytes:
        raise DiskTooSmall(f"--out {out}: the disk there has {human(available)} free, and this run needs about "
                           f"{human(need.bytes)} ({need.how}); point --out at a larger disk, or keep no arms with --save-arms none")
    return f"disk: this run needs about {human(need.bytes)} under {out} ({need.how}); {human(available)} free"
