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

from packcheck.harness.errors import InputError

GOOD, BAD, SKIP = "good", "bad", "skip"


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    status: str  # good | bad | skip
    failing: tuple[str, ...] = ()  # scenarios that failed or errored
    reason: str = ""  # why a revision could not be judged (skip)


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "packcheck" / "bisect.json"


class CorruptCache(InputError):
    def __init__(self, path: Path, what: str):
        super().__init__(f"--cache {path}: {what}; it is not a packcheck bisect cache (or it was cut short): delete it, "
                         "or give --cache another file")


class VerdictCache:
    def __init__(self, path: Path):
        self.path = Path(path)

    def check(self) -> None:
        """Raise CorruptCache if the file exists but is not a cache this code wrote."""
        self._read()

    def _read(self) -> dict:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptCache(self.path, f"not JSON ({err})") from None
        if not isinstance(data, dict):
            raise CorruptCache(self.path, f"a JSON {type(data).__name__}, not an object of outcomes")
        for key, entry in data.items():
            if not (isinstance(entry, dict) and entry.get("status") in (GOOD, BAD, SKIP) and isinstance(entry.get("failing"), list)
                    and isinstance(entry.get("reason"), str)):
                raise CorruptCache(self.path, f"entry {key[:80]!r} is not an outcome (status good|bad|skip, failing, reason)")
        return data

    def get(self, key: str) -> Outcome | None:
        entry = self._read().get(key)
        return None if entry is None else Outcome(status=entry["status"], failing=tuple(entry["failing"]), reason=entry["reason"])

    def put(self, key: str, outcome: Outcome) -> None:
        data = self._read() | {key: asdict(outcome) | {"failing": list(outcome.failing)}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(scratch, self.path)
