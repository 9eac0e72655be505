"""Live launches by (engine, device, world size): every arm of every engine runs in an engine process.

    with LaunchPool(workdir, timeout=60.0) as pool:
        info = pool.engine_info("mypkg.engine:MyEngine", "cpu")   # EngineInfo, built in the engine's own process
        outcome = pool.run("mypkg.engine:MyEngine", case)           # world 1 or a dp x cp mesh alike

The pool keeps the launches of the engines in use (at most `keep`, the least recently used closed
first), so the arms of an engine share its processes' start-up, and no engine's code ever runs
in the harness's process or in another engine's. An engine that cannot start is remembered: its
further arms get the same error without another try.

Every launch's processes run in a mount namespace where packcheck's code, the Python installation, the checkpoint
cache, the goldens, the launches folder and the run directory (`protect`) are read-only, and only the launch's own
folder is writable (harness/launch/protected.py, confine.py); where the machine allows no namespace, `notices` says why.
Behind it, and in its place where there is none: before it starts its first engine process, the pool reads the goldens
(noise floors included), the checkpoint cache's digests and packcheck's own files (harness/own_files.py) into memory for
the run; before each launch starts, packcheck's files are checked again (a changed one is written back before the
launch imports it); after each case, its case.json must be the file packcheck wrote; the arms the run saves are held
with the engines alive since (`saved`, harness/launch/evidence.py). When its last launch has ended (`close`, `kill`),
`damage` names each golden, cache entry, file of packcheck or saved arm an engine changed meanwhile, and each file is
restored (docs/isolation.md).

Disk stays bounded (harness/launch/tidy.py): a case's folder goes when the caller says the verdict that used it
is decided (`discard_cases`), a launch's checkpoint copy when the launch closes. With a `Usage`, the pool samples
the ranks' memory after every case and the disk before each cleanup (harness/launch/usage.py).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from packcheck.harness.contract import Case
from packcheck.harness.engines import EngineInfo
from packcheck.harness.golden import golden_dir
from packcheck.harness.golden.seal import pin as pin_goldens
from packcheck.harness.golden.seal import unpin as unpin_goldens
from packcheck.harness.own_files import check as check_own_files
from packcheck.harness.own_files import pin as pin_own_files
from packcheck.harness.own_files import unpin as unpin_own_files
from packcheck.harness.launch.capacity import cannot_host, visible_gpus
from packcheck.harness.launch.evidence import Evidence
from packcheck.harness.launch.launch import STARTUP_SECONDS, Launch, LaunchFailed
from packcheck.harness.launch.outcome import OK, CaseOutcome
from packcheck.harness.launch.protected import confinement, package_folders
from packcheck.harness.launch.raised import ErrorKind
from packcheck.harness.launch.tidy import discard
from packcheck.harness.launch.usage import Usage
from packcheck.harness.launch.zygotes import end_orphans
from packcheck.harness.models import pin_cache, unpin_cache
from packcheck.harness.text import path_name

KEEP = 3  # live launches: an engine's world 1, 2 and 4 on a CPU machine

Key = tuple[str, str, int]  # engine spec, device, world size


class LaunchPool:
    def __init__(self, workdir: Path, timeout: float, keep: int = KEEP, startup_seconds: float = STARTUP_SECONDS,
                 usage: Usage | None = None, protect: tuple[Path, ...] = ()):
        self.workdir, self.timeout, self.keep, self.startup_seconds = Path(workdir), timeout, keep, startup_seconds
        self.usage = usage
        self._cases: list[tuple[Path, str]] = []  # case folders run since the last discard_cases, with their outcome's status
        self._live: OrderedDict[Key, Launch] = OrderedDict()
        self._failed: dict[Key, LaunchFailed] = {}
        self._info: dict[tuple[str, str], EngineInfo | LaunchFailed] = {}
        self._previous: dict[Key, CaseOutcome] = {}  # the last outcome per key, to note a fresh launch after a failure
        self.confinement = confinement(self.workdir, protect)
        # what the run compares with and starts from, held before any engine process exists (docs/isolation.md)
        pin_goldens(golden_dir())
        pin_cache()
        pin_own_files(package_folders(), skip=[golden_dir()])
        self._pinned = True
        self._started: list[Launch] = []  # every launch, for how it was confined
        self.evidence = Evidence()
        # after close or kill: each golden, cached checkpoint, file of packcheck or saved arm an engine changed, named
        self.damage: list[str] = []

    def __enter__(self) -> LaunchPool:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.kill()

    def engine_info(self, spec: str, device: str) -> EngineInfo:
        """What the engine says of itself, from its world-1 launch (on the CPU where no GPU is visible: every
        arm of a cuda run then runs there); LaunchFailed if it does not start."""
        if device == "cuda" and visible_gpus() == 0:
            device = "cpu"
        if (spec, device) not in self._info:
            try:
                self._info[spec, device] = EngineInfo.from_json(self._launch((spec, device, 1)).engine_info())
            except LaunchFailed as failed:
                self._failed[spec, device, 1] = failed
                self._info[spec, device] = failed
            except (KeyError, TypeError, ValueError) as err:
                self._info[spec, device] = LaunchFailed(f"the engine's description of itself is malformed: {type(err).__name__}: {err}",
                                                        ErrorKind.OTHER, type(err).__name__)
        known = self._info[spec, device]
        if isinstance(known, LaunchFailed):
            raise known
        return known

    def described(self, spec: str) -> EngineInfo | None:
        """The engine's description where a launch of this pool already gave it (on any device), else None; launches nothing."""
        return next((info for (known, _), info in self._info.items() if known == spec and isinstance(info, EngineInfo)), None)

    def reason(self, spec: str, case: Case) -> str | None:
        """The engine's own reason to decline `case` (its unsupported_reason, asked in its process), or None.
        Asking needs no mesh and no accelerator: the question goes to the engine's world-1 launch on
        the CPU, so a machine without the case's device or ranks can still ask it."""
        outcome = self.run(spec, case, mode="reason", key=(spec, "cpu", 1))
        if outcome.status != "unsupported":
            raise RuntimeError(f"asking engine {spec!r} about case {case.name!r} failed:\n{outcome.describe()}")
        return outcome.unsupported

    def force(self, spec: str, case: Case) -> CaseOutcome:
        """Hand the engine `case` although it declines it (the conformance suite checks that it raises
        UnsupportedCase), in its world-1 CPU launch like `reason`: a declined case may name a device or
        a mesh this machine does not have."""
        return self.run(spec, case, mode="force", key=(spec, "cpu", 1))

    def run(self, spec: str, case: Case, mode: str = "run", key: Key | None = None, capture: dict | None = None) -> CaseOutcome:
        """`case` on its device's and world size's launch of `spec` (started if needed), or on the launch
        `key` names; `mode` (and a "capture" mode's request) as Launch.run takes them."""
        key = key or (spec, case.device, case.parallel.world_size)
        machine_reason = cannot_host(case) if mode in ("run", "capture") else None
        if machine_reason is not None:
            return CaseOutcome(case=case.name, unsupported=f"this machine: {machine_reason}")
        failed = self._failed.get(key) or next((f for (s, d, _), f in self._failed.items() if (s, d) == key[:2]), None)
        if failed is not None:  # an engine that cannot start at one world size cannot at another
            return failed.outcome(case.name)
        launch = self._launch(key)
        fresh = launch.cases == 0
        outcome = launch.run(case, mode, capture)
        if (changed := launch.case_file_changed()) is not None:
            others = sorted({k[0] for k, other in self._live.items() if other is not launch})
            outcome = CaseOutcome(case=case.name, error_kind=ErrorKind.OTHER, directory=outcome.directory,
                                  error=f"{changed}: what the ranks ran is not packcheck's case. Engines whose processes "
                                        f"were alive meanwhile: {', '.join(others) or 'none but this one'}")
        if self.usage is not None:
            self.usage.sample_ranks(_pids(launch))
        if outcome.directory is not None:
            self._cases.append((outcome.directory, outcome.status))
        previous = self._previous.get(key)
        if fresh and previous is not None and previous.status not in (OK, "unsupported", "invalid"):
            outcome.notes.append(f"run in a fresh launch after case {previous.case!r} ended in {previous.status}")
        self._previous[key] = outcome
        if not launch.alive:
            del self._live[key]
            if launch.cases == 1 and not launch.ready:
                self._failed[key] = LaunchFailed(outcome.error or "the launch ended before its engine was built", outcome.error_kind,
                                                 outcome.error_type)
        return outcome

    def release(self, spec: str) -> None:
        """Close `spec`'s live launches now (its arms are over): kept warm, idle ranks still poll for cases and
        take CPU from the arms that run (benchmarks/idle_launch.py)."""
        for key in [key for key in self._live if key[0] == spec]:
            self._live.pop(key).close()

    def saved(self, folder: Path) -> None:
        """The harness has saved a verdict's arms into `folder`: held as saved, every engine alive from now on a witness."""
        self.evidence.saved(folder, {key[0] for key in self._live})

    @property
    def notices(self) -> list[str]:
        """Why launches of this pool ran unconfined (harness/launch/confine.py), once per reason."""
        said = {launch.process.confined for launch in self._started}
        return sorted(f"engine processes ran without a mount namespace ({why}); packcheck's files, the cache, the goldens "
                      "and the run directory were checked after the run instead (docs/isolation.md)"
                      for why in said if why and why.startswith("not confined"))

    def discard_cases(self) -> None:
        """The verdict that used the cases run so far is decided (and its arms saved where asked): their folders go,
        but for the small files of a case that erred or hung (harness/launch/tidy.py)."""
        if self.usage is not None:
            self.usage.sample_disk()
        for directory, status in self._cases:
            discard(directory, status)
        self._cases.clear()

    def close(self) -> None:
        for launch in self._live.values():
            launch.close()
        self._live.clear()
        end_orphans()
        self._unpin()

    def kill(self) -> None:
        """End every live launch now (an interrupted run): agents and ranks are killed, nothing is left behind."""
        for launch in self._live.values():
            launch.kill()
        self._live.clear()
        end_orphans()
        self._unpin()

    def _unpin(self) -> None:
        """No engine process is left: what an engine changed of the goldens, the cache, packcheck's files and the saved
        arms is named, and each file but a saved arm restored."""
        if self._pinned:
            self._pinned = False
            self.damage += unpin_goldens() + unpin_cache() + unpin_own_files() + self.evidence.lost()

    def _launch(self, key: Key) -> Launch:
        if key in self._live and self._live[key].alive:
            self._live.move_to_end(key)
            return self._live[key]
        self._live.pop(key, None)
        while len(self._live) >= self.keep:
            _, oldest = self._live.popitem(last=False)
            oldest.close()
        spec, device, world_size = key
        self.damage += check_own_files()  # written back before this launch imports it
        self.evidence.launched(spec)
        launch = Launch.start(spec, device, world_size, self.timeout, self.workdir / path_name(spec), self.startup_seconds,
                              self.confinement)
        self._live[key] = launch
        self._started.append(launch)
        return launch


def _pids(launch: Launch) -> list[int]:
    """The process ids its ranks wrote (pid.rank<N>), where readable."""
    pids = []
    for path in sorted(launch.dir.path.glob("pid.rank*")):
        try:
            pids.append(int(json.loads(path.read_text())[0]))
        except (OSError, ValueError, TypeError, IndexError):
            continue
    return pids
