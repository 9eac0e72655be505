"""The evidence a run saved (a verdict's arms under OUT/cases/, harness/run_dir/saved_arms.py), fingerprinted as the
harness wrote it, with the engines whose processes were alive since: lost evidence names the engine.

    evidence = Evidence()
    evidence.saved(folder, alive=["reference"])   # the harness saved arms into `folder`; these engines' processes live
    evidence.launched("mypkg:Engine")              # an engine's launch starts: a witness of everything saved so far
    evidence.lost() -> [str]                       # when the last launch has ended: each folder changed since, named

A fingerprint is every entry's inode, size, mtime and ctime (harness/launch/private_checkpoint.py), not a digest: an
arm at 0.6b holds gigabytes, and any write, truncation, rename, added or removed file moves a ctime, which no process
sets back. The run directory is read-only to engine processes in their mount namespace (harness/launch/confine.py);
this is the check where the machine allows none, and the second line where it does.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from packcheck.harness.launch.private_checkpoint import Fingerprint, fingerprint


class Evidence:
    def __init__(self):
        self._held: dict[Path, tuple[Fingerprint | None, set[str]]] = {}

    def saved(self, folder: Path, alive: Iterable[str]) -> None:
        """The harness has just written into `folder` (again): it is held as it is now."""
        witnesses = self._held.get(folder, (None, set()))[1]
        self._held[folder] = (fingerprint(folder), witnesses | set(alive))

    def launched(self, engine: str) -> None:
        for _, witnesses in self._held.values():
            witnesses.add(engine)

    def lost(self) -> list[str]:
        problems = []
        for folder, (held, witnesses) in self._held.items():
            if fingerprint(folder) != held:
                who = ", ".join(sorted(witnesses)) or "none (a process outside the run)"
                problems.append(f"the saved arms in {folder} were changed after the run saved them: that evidence is lost. "
                                f"Engines whose processes were alive since: {who}")
        self._held.clear()
        return problems
