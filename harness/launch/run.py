"""run_distributed: run an engine on cases that need several processes, and get every outcome back.

All cases share one world size and run in one launch, one after the other in the same process
group (start-up costs seconds; a case, a fraction of that). A case that fails or hangs ends its
launch; the cases after it run in a fresh launch, so one bad case costs one extra start-up and
never the rest of the run. If the ranks cannot even start (the engine does not import, the
process group does not form), every case gets that error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Sequence

from packcheck.harness.contract import Case
from packcheck.harness.launch.collect import log_tail, read_outcome
from packcheck.harness.launch.guard import GuardedExit, run_guarded
from packcheck.harness.launch.job import Job
from packcheck.harness.launch.layout import CaseDir, LaunchDir
from packcheck.harness.launch.outcome import OK, CaseOutcome

STARTUP_SECONDS = 180.0  # from starting the agent to the first case: torch imports on a loaded machine
TEARDOWN_SECONDS = 10.0  # the agent ending its ranks, on top of the stall allowance


def run_distributed(engine_spec: str, cases: Sequence[Case], device: str, timeout: float, workdir: Path, *,
                    startup_seconds: float = STARTUP_SECONDS) -> list[CaseOutcome]:
    """Run `cases` (all of one world size) on `world_size` processes started by torch elastic;
    one CaseOutcome per case, in order. `engine_spec` is what `resolve_engine` accepts
    ("package.module:Class" or a registered name; see `engine_spec()`); `timeout` bounds each case
    on each rank; `workdir` keeps every launch's files (see packcheck.harness.launch.layout)."""
    if not cases:
        return []
    world_sizes = {case.parallel.world_size for case in cases}
    if len(world_sizes) != 1:
        raise ValueError(f"run_distributed needs cases of one world size; got {sorted(world_sizes)}: group them by world size")
    world_size = world_sizes.pop()
    outcomes: list[CaseOutcome] = []
    pending = list(cases)
    while pending:
        launch, case_dirs = _prepare(Path(workdir), engine_spec, pending, device, timeout, world_size)
        guarded = _launch(launch, world_size, device, timeout, startup_seconds)
        finished = _read(launch, case_dirs, pending, world_size, timeout, guarded)
        if not finished:
            failure = _startup_failure(launch, guarded, world_size)
            outcomes += [CaseOutcome(case=case.name, error=failure, error_type=_startup_error_type(launch)) for case in pending]
            break
        if outcomes and outcomes[-1].status != OK:
            finished[0].notes.append(f"run in a fresh launch after case {outcomes[-1].case!r} ended in {outcomes[-1].status}")
        outcomes += finished
        pending = pending[len(finished):]
    return outcomes


def _prepare(workdir: Path, engine_spec: str, cases: list[Case], device: str, timeout: float,
             world_size: int) -> tuple[LaunchDir, list[CaseDir]]:
    workdir.mkdir(parents=True, exist_ok=True)
    index = sum(1 for p in workdir.glob("launch-*"))
    while True:  # the next free launch-<n>, also when another run shares the directory
        try:
            (workdir / f"launch-{index}").mkdir()
            break
        except FileExistsError:
            index += 1
    launch = LaunchDir(workdir / f"launch-{index}")
    launch.cases.mkdir()
    case_dirs = [CaseDir.create(launch.cases, i, case.name) for i, case in enumerate(cases)]
    for case, case_dir in zip(cases, case_dirs):
        case_dir.case.write_text(json.dumps(case.to_json()))
    Job(engine=engine_spec, device=device, timeout=timeout, world_size=world_size, run_id=f"{os.getpid()}-{index}",
        case_dirs=tuple(str(d.path.resolve()) for d in case_dirs)).save(launch.job)
    return launch, case_dirs


def _launch(launch: LaunchDir, world_size: int, device: str, timeout: float, startup_seconds: float) -> GuardedExit:
    job = str(launch.job.resolve())

    def last_progress() -> float | None:
        return max((p.stat().st_mtime for p in launch.cases.glob("*/started.rank*")), default=None)

    return run_guarded(
        [sys.executable, "-m", "packcheck.harness.launch.agent", job], env=_environment(world_size, device), log=launch.agent_log,
        last_progress=last_progress, pid_files=lambda: sorted(launch.path.glob("pid.rank*")),
        startup_seconds=startup_seconds, stall_seconds=2 * timeout + TEARDOWN_SECONDS, marker=job,
    )


def _environment(world_size: int, device: str) -> dict[str, str]:
    """The caller's environment, plus its import path (an engine importable here is importable
    in the ranks) and, on CPU, the cores shared out between the ranks."""
    env = dict(os.environ)
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


def _read(launch: LaunchDir, case_dirs: list[CaseDir], cases: list[Case], world_size: int, timeout: float,
          guarded: GuardedExit) -> list[CaseOutcome]:
    """Outcomes of the cases this launch got to, up to and including the first that did not pass."""
    finished = []
    for case, case_dir in zip(cases, case_dirs):
        outcome = read_outcome(case_dir, case.name, launch, world_size, timeout, guarded.killed_after is not None)
        if outcome is None:
            break
        finished.append(outcome)
        if outcome.status != OK:
            break
    return finished


def _startup_reports(launch: LaunchDir) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(launch.path.glob("startup.rank*.json"))]


def _startup_error_type(launch: LaunchDir) -> str | None:
    reports = _startup_reports(launch)
    return reports[0]["type"] if reports else None


def _startup_failure(launch: LaunchDir, guarded: GuardedExit, world_size: int) -> str:
    reports = _startup_reports(launch)
    if reports:
        first = reports[0]
        return f"rank {first['rank']} failed before its first case: {first['message']}\n{first['traceback'].rstrip()}"
    if guarded.killed_after is not None:
        head = f"no rank started a case within {guarded.killed_after:.0f} s; the parent killed the launch"
    else:
        head = f"the launch ended (agent exit status {guarded.returncode}) before any rank started a case"
    agent = launch.agent_log.read_text(errors="replace").splitlines()[-20:] if launch.agent_log.exists() else []
    if launch.agent_result.exists():
        agent += json.loads(launch.agent_result.read_text()).get("error", "").splitlines()[-20:]
    ranks = [f"rank {r} stderr:\n    | " + "\n    | ".join(log_tail(launch, r)) for r in range(world_size) if log_tail(launch, r)]
    return "\n".join([head, "agent output (last lines):", *(f"    | {line}" for line in agent), *ranks])
