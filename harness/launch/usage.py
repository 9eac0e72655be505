"""The peaks a run reaches, measured as it goes: disk under its output folder, and memory of the harness and of the
engine's ranks.

    usage = Usage(out)                 # the LaunchPool samples the ranks after every case, the disk before a verdict's cleanup
    usage.sample_ranks(rank_pids)      # each rank's peak RSS so far
    usage.sample_disk()                # bytes under `out` now
    usage.to_json()                    # {"peak_disk_bytes": ..., "harness_peak_rss_bytes": ..., "engine_peak_rss_bytes": ...}

What each figure is, honestly:
- peak disk: the largest of the samples of the bytes allocated under `out` (st_blocks, each inode once, as `du`
  counts), taken once a verdict's arms are saved, before its case folders go: within a verdict files only
  accumulate, so that is its peak, but for what lives and dies inside it (a checkpoint copy replaced after a case
  that changed it, the copy of a launch closed to make room for another).
- harness peak RSS: this process's own high-water mark (getrusage RUSAGE_SELF).
- engine peak RSS: the largest VmHWM (the kernel's high-water mark of a process's resident memory) of any rank,
  read from /proc after each case of its launch; None where /proc has no such field (not Linux). A rank the OOM
  killer ended is not seen. The agent (torch elastic's launcher) is packcheck's, not the engine's, and not counted.
- GPU memory (torch.cuda.max_memory_allocated) is known only inside the ranks: not measured here.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Iterable
from pathlib import Path


def bytes_under(root: Path) -> int:
    """Bytes allocated on disk under `root`, each inode counted once; 0 when it does not exist."""
    seen, total = set(), 0
    for base, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            try:
                stat = os.lstat(os.path.join(base, name))
            except OSError:  # removed while we walked
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def peak_rss(pid: int) -> int | None:
    """The process's resident-memory high-water mark (VmHWM) in bytes, or None (gone, or not Linux)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def own_peak_rss() -> int:
    """This process's peak RSS in bytes (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class Usage:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.peak_disk = 0
        self.engine_peak_rss: int | None = None

    def sample_disk(self) -> None:
        self.peak_disk = max(self.peak_disk, bytes_under(self.root))

    def sample_ranks(self, rank_pids: Iterable[int]) -> None:
        for pid in rank_pids:
            rss = peak_rss(pid)
            if rss is not None:
                self.engine_peak_rss = max(self.engine_peak_rss or 0, rss)

    def to_json(self) -> dict:
        return {"peak_disk_bytes": self.peak_disk, "harness_peak_rss_bytes": own_peak_rss(),
                "engine_peak_rss_bytes": self.engine_peak_rss}

    def summary(self, measured: dict) -> str:
        """One line for the console, of what `to_json` gave."""
        engine = measured["engine_peak_rss_bytes"]
        engine = "not measured" if engine is None else f"{human(engine)} (the largest rank's peak RSS)"
        return (f"peak disk under {self.root}: {human(measured['peak_disk_bytes'])}; peak memory: harness "
                f"{human(measured['harness_peak_rss_bytes'])} RSS, engine {engine}; GPU memory is not measured "
                "(known only inside the ranks)")


def human(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"
