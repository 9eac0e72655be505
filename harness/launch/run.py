"""run_distributed: run an engine on cases of one world size in its own processes, and get every outcome back.

The cases run one after the other in one launch (start-up costs seconds; a case, a fraction of
that). A case that fails or hangs ends its launch; the cases after it run in a fresh launch, so
one bad case costs one extra start-up and never the rest of the run. If the ranks cannot even
start (the engine does not import, the process group does not form), every case gets that error.
A runner with many engines and world sizes keeps a LaunchPool instead (harness/launch/pool.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from packcheck.harness.contract import Case
from packcheck.harness.launch.launch import STARTUP_SECONDS
from packcheck.harness.launch.outcome import CaseOutcome
from packcheck.harness.launch.pool import LaunchPool


def run_distributed(engine_spec: str, cases: Sequence[Case], device: str, timeout: float, workdir: Path, *,
                    startup_seconds: float = STARTUP_SECONDS) -> list[CaseOutcome]:
    """Run `cases` (all of one world size) on `world_size` processes started by torch elastic;
    one CaseOutcome per case, in order. `engine_spec` is what `resolve_engine` accepts
    ("package.module:Class" or a registered name; see `engine_spec()`); `timeout` bounds each case
    on each rank; `workdir` keeps every launch's files (see harness.launch.layout)."""
    world_sizes = {case.parallel.world_size for case in cases}
    if len(world_sizes) > 1:
        raise ValueError(f"run_distributed needs cases of one world size; got {sorted(world_sizes)}: group them by world size")
    if any(case.device != device for case in cases):
        raise ValueError(f"every case must ask for device {device!r}")
    with LaunchPool(workdir, timeout, keep=1, startup_seconds=startup_seconds) as pool:
        return [pool.run(engine_spec, case) for case in cases]
