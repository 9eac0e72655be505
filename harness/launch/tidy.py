"""What of a case's directory outlives the case: nothing large, and nothing at all once its verdict is decided,
except the small files of a case that erred or hung.

Everything a case leaves (rank 0's StepResult, the collective logs, the ranks' reports and stacks, invalid.json)
is read into its CaseOutcome when the case ends (collect.py), and the run saves the arms `--save-arms` asks for
from that outcome into its own folder (harness/run/scenario_runner.py, save_arms). So:

    discard(case_dir, status)  once the verdict that used the case is decided (LaunchPool.discard_cases): the whole
                               folder, or, after an error or a hang, everything but its files under KEEP_BYTES

Not sooner: the outcome's result is memory-mapped from result.safetensors (StepResult.load), so a file removed
while the verdict still holds its result keeps its blocks on the disk until the verdict lets go of it, and only
stops being visible to whoever measures the disk (harness/launch/usage.py).

A case that erred or hung keeps its harness files (case.json, each rank's report, stacks and collective log) and
whatever small files the engine wrote in it (its working directory): a person debugging the failure looks there,
and they cost kilobytes. At 8B one arm's gradients are 16 GB; kept, six 0.6b runs filled a 64 GiB disk (issue 27).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from packcheck.harness.launch.layout import CaseDir
from packcheck.harness.launch.outcome import ERROR, HANG

KEEP_BYTES = 1 << 20  # a file of a failed case larger than this is not what a person reads


def discard(directory: Path, status: str) -> None:
    """Remove the case's folder once its verdict is decided; after an error or a hang, keep its small files."""
    if status not in (ERROR, HANG):
        shutil.rmtree(directory, ignore_errors=True)
        return
    shutil.rmtree(CaseDir(directory).result, ignore_errors=True)
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            try:
                if os.lstat(path).st_size > KEEP_BYTES:
                    os.unlink(path)
            except OSError:
                pass
