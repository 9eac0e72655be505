"""One rank of a launch: `python -m packcheck.harness.launch.worker JOB.json`, started by torch elastic.

Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment (torchrun
semantics, so the same command runs under torchrun or a cluster scheduler), then:

1. initialises the default process group (gloo on CPU; NCCL on CUDA, on device LOCAL_RANK) with a
   timeout well past the watchdog's;
2. installs the collective recorder, then resolves the engine from its spec string (after, so
   that an engine binding torch.distributed functions at import binds the recording ones);
3. runs every case of the job in order: `engine.run(case)` under the rank watchdog; rank 0 saves
   the StepResult it returns; every rank saves its collective log; all ranks meet at an
   out-of-band barrier before the next case.

An exception from the engine (or no StepResult on rank 0) stops this rank with a report, and the
other ranks with it: the launch ends there and the parent relaunches the remaining cases.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from packcheck.harness.collectives import CollectiveRecorder, install_recorder
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Engine, resolve_engine
from packcheck.harness.launch import exit_status
from packcheck.harness.launch.job import Job
from packcheck.harness.launch.layout import CaseDir, LaunchDir, write_json_atomically
from packcheck.harness.launch.rank_sync import RankSync
from packcheck.harness.launch.rank_watchdog import RankWatchdog


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path = argv[0]
    job = Job.load(job_path)
    launch = LaunchDir(os.path.dirname(os.path.abspath(job_path)))
    rank, world_size, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    _die_with_parent()
    launch.pid(rank).write_text(str(os.getpid()))
    try:
        engine, recorder, watchdog, sync = _start(job, rank, world_size, local_rank)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which fails every case with it
        write_json_atomically(launch.startup(rank), {
            "rank": rank, "type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err),
            "traceback": "".join(traceback.format_exception(err)),
        })
        return exit_status.STARTUP_FAILED
    for index, path in enumerate(job.case_dirs):
        _run_case(index, CaseDir(path), engine, rank, recorder, watchdog, sync)
    _finish()
    return 0


def _start(job: Job, rank: int, world_size: int, local_rank: int) -> tuple[Engine, CollectiveRecorder, RankWatchdog, RankSync]:
    if job.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(job.backend, timeout=timedelta(seconds=job.process_group_timeout))
    recorder = install_recorder()
    engine = resolve_engine(job.engine)
    watchdog = RankWatchdog(rank, world_size, job.run_id, job.timeout, recorder).start()
    return engine, recorder, watchdog, RankSync(rank, world_size, job.run_id)


def _run_case(index: int, case_dir: CaseDir, engine: Engine, rank: int, recorder: CollectiveRecorder,
              watchdog: RankWatchdog, sync: RankSync) -> None:
    data = json.loads(case_dir.case.read_text())
    recorder.start_case()
    watchdog.arm(index, case_dir, data["name"])
    case_dir.started(rank).write_text(str(time.time()))
    try:
        result = engine.run(Case.from_json(data))
        watchdog.engine_returned()
        if rank == 0:
            _save_result(result, case_dir)
    except BaseException as err:  # noqa: BLE001 - any failure of the engine becomes this rank's report
        watchdog.stop("raised", err)
    write_json_atomically(case_dir.collectives(rank), recorder.snapshot())
    sync.wait_all(f"end/{index}")
    watchdog.disarm()
    case_dir.done(rank).write_text(str(time.time()))


def _save_result(result: object, case_dir: CaseDir) -> None:
    if not isinstance(result, StepResult):
        raise TypeError(f"engine.run returned {type(result).__name__} on rank 0; a distributed engine returns "
                        "the StepResult on rank 0 (other ranks may return None)")
    result.collectives = None  # the parent fills in every rank's recorded log
    result.save(case_dir.result)


def _finish() -> None:
    dist.destroy_process_group()


def _die_with_parent() -> None:
    """Linux: the kernel kills this rank if the agent dies, even by SIGKILL."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the rank watchdog notices the agent is gone


if __name__ == "__main__":
    exit_status.exit_now(main())
