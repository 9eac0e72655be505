"""A live launch: one engine at one world size, its agent and ranks waiting for the parent's cases.

    launch = Launch.start(engine_spec, device="cpu", world_size=2, timeout=60.0, workdir=Path("reports/x/launches"))
    info = launch.engine_info()     # what rank 0 built; LaunchFailed if the engine never came up
    outcome = launch.run(case)      # the case's CaseOutcome; after an error or hang the launch has ended
    launch.close()                  # the ranks leave; they are killed if they do not

Start-up (an interpreter per process, torch, the rendezvous, building the engine) costs seconds; a
case costs a fraction of that, so a launch serves every case of its engine and world size for as
long as they succeed. A case that errs or hangs ends the launch (its ranks stop, the agent tears
them down), and the parent starts a fresh one for the next case. Each case gets its own directory,
which is the engine's working directory, and the model checkpoint as copied from the cache (the launch's
private copy, copied afresh after a case that changed it, removed when the launch ends:
harness/launch/private_checkpoint.py): nothing an engine writes reaches the harness's files or another case.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from packcheck.harness.contract import Case
from packcheck.harness.files import write_json_atomically
from packcheck.harness.launch.collect import log_tail, read_outcome
from packcheck.harness.launch.guard import GuardedLaunch
from packcheck.harness.launch.job import Job
from packcheck.harness.launch.layout import CaseDir, LaunchDir
from packcheck.harness.launch.private_checkpoint import PrivateCheckpoint
from packcheck.harness.launch.protected import Confinement
from packcheck.harness.launch.outcome import CaseOutcome
from packcheck.harness.launch.quiet import quiet
from packcheck.harness.launch.raised import ErrorKind
from packcheck.harness.launch.zygotes import launch as fork_launch
from packcheck.harness.launch.zygotes import prefork

STARTUP_SECONDS = 180.0  # from starting the agent to the engine built on every rank: torch imports on a loaded machine
TEARDOWN_SECONDS = 10.0  # the ranks' reports and the agent's teardown, on top of the case's timeout
STACKS_SETTLE_SECONDS = 0.25  # a stacks file unchanged this long is whole
CLOSE_SECONDS = 30.0  # a closed launch's ranks leave within this, or are killed
POLL_SECONDS = 0.01


class LaunchFailed(Exception):
    """The launch's ranks never became ready: the engine does not import or build, or the process group did not form.
    `kind`: what the failing rank raised (raised.py), or BUILD_TIMEOUT, or None when no rank reported; `error_type`:
    the exception's class, for people only."""

    def __init__(self, text: str, kind: ErrorKind | None, error_type: str | None = None):
        super().__init__(text)
        self.text, self.kind, self.error_type = text, kind, error_type

    @property
    def hung(self) -> bool:
        return self.kind is ErrorKind.BUILD_TIMEOUT

    def outcome(self, case: str, directory: Path | None = None) -> CaseOutcome:
        """The outcome of a case this launch never got to: this error."""
        return CaseOutcome(case=case, error=self.text, error_kind=self.kind, error_type=self.error_type, directory=directory)


class Launch:
    def __init__(self, directory: LaunchDir, process: GuardedLaunch, world_size: int, device: str, timeout: float,
                 startup_seconds: float):
        self.dir, self.process = directory, process
        self.world_size, self.device, self.timeout, self.startup_seconds = world_size, device, timeout, startup_seconds
        self.started_at = time.monotonic()
        self.cases = 0
        self.ended = False
        self.checkpoint = PrivateCheckpoint(directory.checkpoint)
        self._case_file: tuple[Path, tuple | None] | None = None  # the last case.json written, and its identity then

    @classmethod
    def start(cls, engine_spec: str, device: str, world_size: int, timeout: float, workdir: Path,
              startup_seconds: float = STARTUP_SECONDS, confine: Confinement | None = None) -> Launch:
        """Start a launch, its processes forked from this process's zygote (harness/launch/zygotes.py), confined as
        `confine` says (harness/launch/protected.py; None: not at all)."""
        directory = _new_launch_dir(Path(workdir))
        directory.cases.mkdir()
        directory.queue.mkdir()
        job = Job(engine=engine_spec, device=device, timeout=timeout, world_size=world_size,
                  run_id=f"{os.getpid()}-{directory.path.name}-{time.monotonic_ns()}")
        job.save(directory.job)
        process = fork_launch(["-m", "packcheck.harness.launch.agent", str(directory.job.resolve())],
                             _environment(world_size, device), directory.agent_log,
                             None if confine is None else confine.for_launch(directory.path, device))
        return cls(directory, process, world_size, device, timeout, startup_seconds)

    @property
    def alive(self) -> bool:
        return not self.ended and self.process.poll() is None

    @property
    def ready(self) -> bool:
        return self.dir.engine_info.exists()

    def engine_info(self) -> dict:
        """Rank 0's description of the engine it built (harness/engines/info.py); LaunchFailed if it never came up."""
        while not self.ready:
            if self.process.poll() is not None or self._startup_overdue():
                self._end(kill=self.process.poll() is None)
                raise self._startup_failure()
            time.sleep(POLL_SECONDS)
        return json.loads(self.dir.engine_info.read_text())

    def run(self, case: Case, mode: str = "run", capture: dict | None = None) -> CaseOutcome:
        """Run one case and return its outcome. `mode`: "run" (unless the engine's own unsupported_reason
        declines it), "force" (even then), "reason" (only ask: the outcome is unsupported, its reason None
        when the engine would run the case), "capture" (run it with the `capture` request on: the ranks
        leave their activations in the outcome's directory, harness/launch/layout.py)."""
        if not self.alive:
            raise RuntimeError(f"launch {self.dir.path} has ended: start a fresh one")
        try:
            case_dir = self._submit(case, mode, capture)
        except FileExistsError as err:  # only the engine's processes write below this launch besides packcheck
            self._end(kill=True)
            return CaseOutcome(case=case.name, error=pre_created(err.filename), error_kind=ErrorKind.OTHER)
        submitted = time.monotonic()
        while True:
            if all(case_dir.done(r).exists() for r in range(self.world_size)):
                return read_outcome(case_dir, case, self.dir, self.world_size, self.timeout, killed_by_guard=False)
            if self.process.poll() is not None:
                self._end(kill=False)
                return self._outcome_after_end(case_dir, case, killed=False)
            if self._stalled(case_dir, submitted):
                self._end(kill=True)
                return self._outcome_after_end(case_dir, case, killed=True)
            time.sleep(POLL_SECONDS)

    def close(self) -> None:
        """No more cases: the ranks leave (killed if they do not within CLOSE_SECONDS)."""
        if self.ended:
            return
        self.dir.close_marker.touch()
        if self.process.wait(CLOSE_SECONDS) is None:
            self.process.kill(self._pid_files())
        self._end(kill=False)

    def kill(self) -> None:
        self._end(kill=True)

    # -- internals ----------------------------------------------------------------------------

    def _submit(self, case: Case, mode: str, capture: dict | None = None) -> CaseDir:
        case_dir = CaseDir.create(self.dir.cases, self.cases, case.name)
        checkpoint = self.checkpoint.for_case(case.model.checkpoint)
        private = case.with_(model=case.model.with_checkpoint(str(checkpoint.resolve())))
        case_dir.case.write_text(json.dumps(private.to_json()))
        case_dir.case.chmod(0o444)
        self._case_file = (case_dir.case, _identity(case_dir.case))
        entry = {"case_dir": str(case_dir.path.resolve()), "mode": mode} | ({"capture": capture} if capture is not None else {})
        write_json_atomically(self.dir.queue_entry(self.cases), entry)
        self.cases += 1
        return case_dir

    def case_file_changed(self) -> str | None:
        """Why the last case's case.json is not the file packcheck wrote (any write, chmod or replacement moves its inode
        or ctime, which no process sets back), or None. Its launch's ranks read it; so might an unconfined process of
        another engine have written it first (docs/isolation.md)."""
        if self._case_file is None:
            return None
        path, written = self._case_file
        if _identity(path) == written:
            return None
        return f"{path} was changed after packcheck wrote it and before its verdict, by a process other than packcheck"

    def _stalled(self, case_dir: CaseDir, submitted: float) -> bool:
        """No rank began the case within the start-up allowance, or it ran past what the ranks' watchdogs allow."""
        started = [case_dir.started(r) for r in range(self.world_size) if case_dir.started(r).exists()]
        if not started:
            return self._startup_overdue() if not self.ready else time.monotonic() - submitted > 2 * self.timeout + TEARDOWN_SECONDS
        first = min(p.stat().st_mtime for p in started)
        return time.time() - first > 2 * self.timeout + TEARDOWN_SECONDS

    def _startup_overdue(self) -> bool:
        """packcheck's own start-up (interpreters, torch, the rendezvous) gets `startup_seconds`; from the
        moment a rank begins importing and building the engine, that is engine code and gets `timeout`."""
        building = [r for r in range(self.world_size) if self.dir.building(r).exists()]
        if building:
            past = time.time() - min(self.dir.building(r).stat().st_mtime for r in building) - self.timeout
            # each building rank writes its stacks at `timeout` (worker.py): once all have, nothing is left to wait for
            return past > TEARDOWN_SECONDS or (past > 0 and all(self._stacks_written(r) for r in building))
        return time.monotonic() - self.started_at > self.startup_seconds

    def _stacks_written(self, rank: int) -> bool:
        """Whether rank `rank`'s stacks are written whole: the file is not empty and has not changed for a moment
        (faulthandler writes a dump frame by frame)."""
        path = self.dir.build_stacks(rank)
        try:
            written = path.stat()
        except FileNotFoundError:
            return False
        return written.st_size > 0 and time.time() - written.st_mtime > STACKS_SETTLE_SECONDS

    def _end(self, kill: bool) -> None:
        """The launch is over: its ranks are gone (killed if `kill`), and so is its checkpoint copy."""
        if kill and self.process.poll() is None:
            self.process.kill(self._pid_files())
        self.ended = True
        self.checkpoint.remove()

    def _pid_files(self) -> list[Path]:
        return sorted(self.dir.path.glob("pid.rank*"))

    def _outcome_after_end(self, case_dir: CaseDir, case: Case, killed: bool) -> CaseOutcome:
        outcome = read_outcome(case_dir, case, self.dir, self.world_size, self.timeout, killed_by_guard=killed)
        if outcome is not None:
            return outcome
        return self._startup_failure().outcome(case.name, case_dir.path)

    def _startup_failure(self) -> LaunchFailed:
        """Why no rank got to the case: a rank's start-up report, else what the agent and the ranks printed."""
        reports = [json.loads(p.read_text()) for p in sorted(self.dir.path.glob("startup.rank*.json"))]
        if reports:
            first = reports[0]
            return LaunchFailed(f"rank {first['rank']} failed before its first case: {first['message']}\n{first['traceback'].rstrip()}",
                                ErrorKind(first["kind"]), first["type"])
        status = self.process.poll()
        stacks = [f"rank {r} stacks while building the engine:\n    | " + "\n    | ".join(text.splitlines()[-40:])
                  for r in range(self.world_size)
                  if self.dir.build_stacks(r).exists() and (text := self.dir.build_stacks(r).read_text(errors="replace").strip())]
        if stacks:
            head = (f"building the engine (its import and constructor) did not finish within {self.timeout:g} s; "
                    "the parent killed the launch")
        elif self.process.pid is None and status is not None:
            head = "the launch was never started: the zygote it is forked from ended first (its output below)"
        elif status is None or status < 0:
            head = f"no rank got to the case within {self.startup_seconds:.0f} s; the parent killed the launch"
        else:
            head = f"the launch ended (agent exit status {status}) before any rank started the case"
        agent = self.dir.agent_log.read_text(errors="replace").splitlines()[-20:] if self.dir.agent_log.exists() else []
        if self.dir.agent_result.exists():
            agent += json.loads(self.dir.agent_result.read_text()).get("error", "").splitlines()[-20:]
        ranks = [f"rank {r} stderr:\n    | " + "\n    | ".join(log_tail(self.dir, r)) for r in range(self.world_size) if log_tail(self.dir, r)]
        agent = ["agent output (last lines):", *(f"    | {line}" for line in agent)] if agent else []
        return LaunchFailed("\n".join([head, *stacks, *agent, *ranks]), ErrorKind.BUILD_TIMEOUT if stacks else None)


def _identity(path: Path) -> tuple | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_mode


def _new_launch_dir(workdir: Path) -> LaunchDir:
    """The next free launch-<n>, also when another run shares the directory."""
    workdir.mkdir(parents=True, exist_ok=True)
    index = sum(1 for _ in workdir.glob("launch-*"))
    while True:
        try:
            (workdir / f"launch-{index}").mkdir()
            return LaunchDir(workdir / f"launch-{index}")
        except FileExistsError:
            index += 1


def prefork_zygote() -> None:
    """Fork the zygote of this process's launches now (zygotes.prefork): from a command that will launch, before it
    starts a thread or runs a torch operation. Launches whose environment differs start a zygote of their own.
    torch._dynamo is imported first (the zygote preloads it anyway): importing it sets TORCHINDUCTOR_CACHE_DIR in this
    process's environment (torch/_dynamo/package.py), and had this process imported it after the fork (transformers'
    models do), every later launch's environment would differ and start a second, fresh zygote."""
    import torch._dynamo  # noqa: F401

    prefork(_environment(1, "cpu"))  # the thread count is given per launch: any world size and device key the same zygote


def _environment(world_size: int, device: str) -> dict[str, str]:
    """The caller's environment, plus its import path (an engine importable here is importable
    in the ranks), third-party progress bars off (quiet.py) and, on CPU, the cores shared out between the ranks."""
    env = quiet(dict(os.environ))
    env["PYTHONPATH"] = os.pathsep.join(_import_roots() + [p for p in [env.get("PYTHONPATH")] if p])
    if device == "cpu":
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // world_size)))
    return env


def _import_roots() -> list[str]:
    """sys.path entries outside the Python installation (the project, the test directory, ...)."""
    installation = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        inside = any(path == p or path.startswith(p + os.sep) for p in installation)
        if os.path.isdir(path) and not inside and path not in roots:
            roots.append(path)
    return roots


def pre_created(path: str) -> str:
    """What an engine that made packcheck's next case folder before packcheck did is told (it once ended the whole run
    with "[Errno 17] File exists" and no verdict, the engine never named)."""
    return (f"the engine's processes created {path} before packcheck did: a case folder is packcheck's to make, and an "
            "engine writes only in its own case's (docs/isolation.md); the launch was ended and the next case gets a fresh one")
