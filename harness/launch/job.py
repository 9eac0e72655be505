"""A Job: what every rank of one launch runs, written by the parent as JSON and read by each rank.

The cases come through the launch's queue (harness/launch/layout.py), in order, in one process
group, for as long as the parent has cases for this engine at this world size: start-up
(importing torch, the rendezvous) costs seconds, a case a fraction of that.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from packcheck.harness.files import write_json_atomically


SCHEMA = "packcheck.launch_job/2"


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    engine: str  # anything packcheck.harness.engines.resolve_engine accepts: "package.module:Class" or a registered name
    device: str  # "cpu" (gloo) or "cuda" (nccl)
    timeout: float  # seconds each case may take on each rank
    world_size: int
    run_id: str  # namespaces this launch's keys in the launcher's store

    @property
    def backend(self) -> str:
        return "nccl" if self.device == "cuda" else "gloo"

    @property
    def process_group_timeout(self) -> float:
        """Well past the watchdog, so that the watchdog, not gloo or NCCL, reports a hang."""
        return 2 * self.timeout + 60.0

    def save(self, path: Path) -> None:
        write_json_atomically(path, {"schema": SCHEMA, **asdict(self)})

    @classmethod
    def load(cls, path: str | Path) -> Job:
        data = json.loads(Path(path).read_text())
        if data.pop("schema", None) != SCHEMA:
            raise ValueError(f"{path} is not a {SCHEMA} file")
        return cls(**data)
