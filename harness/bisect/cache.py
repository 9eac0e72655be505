"""Outcomes of judged revisions in a JSON file, so no revision is judged twice.

Keyed by engine, commit, family, scenario set, dtype and device: everything that decides a
verdict besides packcheck itself (delete the file after upgrading packcheck). `git bisect run`
steps and the driver are separate processes that take turns, so every read goes to the file and
every write replaces it atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    status: str  # good | bad | skip
    failing: tuple[str, ...] = ()  # scenarios that failed or errored
    reason: str = ""  # why a revision could not be judged (skip)


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "packcheck" / "bisect.json"


class VerdictCache:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _read(self) -> dict:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key: str) -> Outcome | None:
        entry = self._read().get(key)
        return None if entry is None else Outcome(status=entry["status"], failing=tuple(entry["failing"]), reason=entry["reason"])

    def put(self, key: str, outcome: Outcome) -> None:
        data = self._read() | {key: asdict(outcome) | {"failing": list(outcome.failing)}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(scratch, self.path)
