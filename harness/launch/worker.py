"""One rank of a launch: `python -m packcheck.harness.launch.worker JOB.json`, started by torch elastic.

Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the environment (torchrun
semantics, so the same command runs under torchrun or a cluster scheduler), then:

1. initialises the default process group (gloo on CPU; NCCL on CUDA, on device LOCAL_RANK) with a
   timeout well past the watchdog's;
2. installs the collective recorder, then resolves the engine from its spec string (after, so
   that an engine binding torch.distributed functions at import binds the recording ones): that
   is engine code, so it runs under --timeout like a case, with a stack dump if it outlasts it;
   rank 0 writes the engine's description (harness/engines/info.py) for the parent;
3. runs the cases the parent queues, in order, until it closes the queue: each in its own case
   directory as working directory, the engine's own `unsupported_reason` first (a declined case
   is recorded, not run), then `engine.run(case)` under the rank watchdog (and, in a distributed case, the
   token meter: what this rank embedded, token_meter.py); in a distributed case that takes an optimizer step every
   rank digests the parameters of the StepResult it returned (harness/compare/param_digest.py: the replicas rank 0's
   result cannot show); rank 0 validates the
   StepResult it returns (a broken one is recorded field by field) and saves it (on a GPU, shares it with the
   harness: harness/launch/device_result.py); every rank saves
   its collective log; all ranks meet at an out-of-band barrier before the next case.

An exception from the engine, an exit or a signal stops this rank (with a report where it can),
and the other ranks with it: the launch ends there and the parent starts a fresh one for the
cases after it.
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta

import torch
import torch.distributed as dist

from packcheck.harness.collectives import CollectiveRecorder, install_recorder
from packcheck.harness.compare.param_digest import params_digest
from packcheck.harness.contract import Case, StepResult
from packcheck.harness.contract.activations import CaptureRequest
from packcheck.harness.engines import Engine, InvalidResult, UnsupportedCase, describe, problems_json, resolve_engine, validate_result
from packcheck.harness.engines.capture import recording
from packcheck.harness.engines.decline import decline_reason
from packcheck.harness.engines.caps import capped_notes, tensors_worth_keeping
from packcheck.harness.files import write_json_atomically
from packcheck.harness.launch import exit_status
from packcheck.harness.launch.log_cap import append_mode
from packcheck.harness.launch.process_tree import start_time
from packcheck.harness.launch.device_result import share, shareable
from packcheck.harness.launch.job import Job
from packcheck.harness.launch.layout import CaseDir, LaunchDir
from packcheck.harness.launch.raised import raised
from packcheck.harness.launch.rank_sync import RankSync
from packcheck.harness.launch.rank_watchdog import RankWatchdog
from packcheck.harness.launch.token_meter import TokenMeter
from packcheck.harness.text import safe_text

# How often a rank looks for the parent's next case: every 10 ms for half a second after a case (the next case of
# a verdict comes within milliseconds), then every 50 ms while it stays idle. At 100 Hz throughout, an idle world-4
# launch kept warm in a pool cost 9.9% of a core, 4.0% at 20 Hz (benchmarks/idle_launch.py).
QUEUE_POLL_SECONDS, QUEUE_IDLE_POLL_SECONDS, QUEUE_IDLE_AFTER_SECONDS = 0.01, 0.05, 0.5


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job_path = argv[0]
    job = Job.load(job_path)
    launch = LaunchDir(os.path.dirname(os.path.abspath(job_path)))
    rank, world_size, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    exit_status.die_with_parent()
    append_mode()  # the watchdog keeps this rank's logs under their cap
    write_json_atomically(launch.pid(rank), [os.getpid(), start_time(os.getpid())])  # markers the parent polls: never seen half-written
    try:
        engine, recorder, watchdog, sync = _start(job, launch, rank, world_size, local_rank)
        info = describe(engine, job.engine).to_json() if rank == 0 else None  # a malformed declaration is a start-up failure
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which fails every case with it
        write_json_atomically(launch.startup(rank), {"rank": rank, **raised(err)})
        return exit_status.STARTUP_FAILED
    if info is not None:
        write_json_atomically(launch.engine_info, info)
    for index, entry in enumerate(_queued(launch)):
        _run_case(index, CaseDir(entry["case_dir"]), engine, rank, recorder, watchdog, sync, mode=entry["mode"],
                  capture=entry.get("capture"))
    _finish()
    return 0


def _queued(launch: LaunchDir):
    """The parent's cases, in order, until it closes the queue (or goes away: the watchdog ends the rank)."""
    index, idle_since = 0, time.monotonic()
    while True:
        entry = launch.queue_entry(index)
        if entry.exists():
            yield json.loads(entry.read_text())
            index, idle_since = index + 1, time.monotonic()
        elif launch.close_marker.exists():
            return
        else:
            idle = time.monotonic() - idle_since > QUEUE_IDLE_AFTER_SECONDS
            time.sleep(QUEUE_IDLE_POLL_SECONDS if idle else QUEUE_POLL_SECONDS)


def _start(job: Job, launch: LaunchDir, rank: int, world_size: int,
           local_rank: int) -> tuple[Engine, CollectiveRecorder, RankWatchdog, RankSync]:
    if job.device == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(job.backend, timeout=timedelta(seconds=job.process_group_timeout))
    recorder = install_recorder()
    write_json_atomically(launch.building(rank), time.time())
    with open(launch.build_stacks(rank), "w") as stacks:
        faulthandler.dump_traceback_later(job.timeout, file=stacks)
        try:
            engine = resolve_engine(job.engine)
        finally:
            faulthandler.cancel_dump_traceback_later()
    watchdog = RankWatchdog(rank, world_size, job.run_id, job.timeout, recorder).start()
    return engine, recorder, watchdog, RankSync(rank, world_size, job.run_id)


def _run_case(index: int, case_dir: CaseDir, engine: Engine, rank: int, recorder: CollectiveRecorder,
              watchdog: RankWatchdog, sync: RankSync, mode: str, capture: dict | None = None) -> None:
    """One case on this rank. `mode`: "run" (unless the engine declines it), "reason" (only ask the
    engine whether it declines it), "force" (run it even if it does: the conformance suite checks
    that an engine handed an unsupported case raises UnsupportedCase), "capture" (run it with the
    `capture` request on: harness/engines/capture.py; each rank saves what its engine recorded)."""
    data = json.loads(case_dir.case.read_text())
    recorder.start_case()
    watchdog.arm(index, case_dir, data["name"])
    write_json_atomically(case_dir.started(rank), time.time())
    if torch.cuda.is_initialized():
        torch.cuda.ipc_collect()  # frees the results of earlier cases the harness has copied (device_result.py)
    os.chdir(case_dir.path)  # what the engine writes to its working directory stays with the case
    meter = None
    try:
        case = Case.from_json(data)
        text = case.model.config.get("text_config", case.model.config)  # a VLM's decoder config is nested
        meter = TokenMeter(case.model.vocab_size, text.get("hidden_size")) if case.parallel.world_size > 1 else nullcontext()
        reason = None if mode == "force" else decline_reason(engine, case)
        if reason is not None or mode == "reason":
            if rank == 0:
                write_json_atomically(case_dir.unsupported, {"reason": None if reason is None else safe_text(reason)})
        else:
            try:
                with meter:
                    result = _run_engine(engine, case, case_dir, rank, capture if mode == "capture" else None)
            except UnsupportedCase as declined:
                if mode != "force" or sync.world_size > 1:
                    raise
                # forced on a declined case, the engine said so as it should: its process is sound, the launch goes on
                write_json_atomically(case_dir.unsupported, {"reason": safe_text(str(declined)), "raised": True})
            else:
                watchdog.engine_returned()
                if case.optimizer is not None and case.parallel.world_size > 1:
                    write_json_atomically(case_dir.replica(rank), params_digest(result))
                if rank == 0:
                    _save_result(engine.name, case, result, case_dir)
    except BaseException as err:  # noqa: BLE001 - any failure of the engine becomes this rank's report
        watchdog.stop("raised", err)
    write_json_atomically(case_dir.collectives(rank), recorder.snapshot())
    if isinstance(meter, TokenMeter):
        write_json_atomically(case_dir.work(rank), meter.to_json())
    if torch.cuda.is_initialized():
        # the engine's cached blocks back to the driver: the harness copies this case's result into GPU memory of its
        # own next, and holds a verdict's results there while this process runs the next case (device_result.py)
        gc.collect()
        torch.cuda.empty_cache()
    sync.wait_all(f"end/{index}")
    watchdog.disarm()
    write_json_atomically(case_dir.done(rank), time.time())


def _run_engine(engine: Engine, case: Case, case_dir: CaseDir, rank: int, capture: dict | None) -> StepResult | None:
    """`engine.run(case)`; with a capture request, under an active recorder, whose activations this rank saves."""
    if capture is None:
        return engine.run(case)
    with recording(CaptureRequest.from_json(capture), case) as active:
        result = engine.run(case)
    activations = active.finish()
    if activations is not None:
        activations.save(case_dir.activations(rank))
    return result


def _save_result(engine: str, case: Case, result: object, case_dir: CaseDir) -> None:
    """Rank 0's result on disk, or every way it breaks the contract (invalid.json): what it cannot
    be saved as is never handed to the parent. Notes over their cap are replaced by a sentence naming it (engines/caps.py)."""
    result = capped_notes(result)
    shared = _shareable(result)
    try:
        # a result shared through CUDA IPC is validated again in full by the harness (outcomes.accept), which says which
        # values are not finite with the same sentences: rank 0 checks everything but that pass over every value
        result = validate_result(engine, case, result, values=not shared)
    except InvalidResult as invalid:
        _keep_invalid(case, result, case_dir)
        write_json_atomically(case_dir.invalid, problems_json([replace(p, sentence=safe_text(p.sentence, 2000)) for p in invalid.problems]))
        return
    result.collectives = None  # the parent fills in every rank's recorded log
    result.param_digests = None  # and every rank's digest
    if shared:
        share(result, case_dir.result)
    else:
        result.save(case_dir.result)


def _shareable(result: object) -> bool:
    """Whether rank 0 hands `result` over through CUDA IPC (device_result.shareable); False for what is not plainly a
    StepResult of tensors (validation says what is wrong with it)."""
    try:
        return isinstance(result, StepResult) and shareable(result)
    except Exception:  # noqa: BLE001 - whatever the engine put there, validate_result describes it
        return False


def _keep_invalid(case: Case, result: object, case_dir: CaseDir) -> None:
    """An invalid result that is still a StepResult of tensors (NaN values, say) is kept beside invalid.json, for
    the run's saved arms and the report, without tensors no comparison can use (engines/caps.py); one that cannot
    be saved is simply not kept."""
    if not isinstance(result, StepResult):
        return
    try:
        result = tensors_worth_keeping(case, result)
        result.collectives = result.param_digests = None
        result.save(case_dir.result)
    except Exception:  # noqa: BLE001 - whatever the engine put in it, invalid.json says what is wrong
        shutil.rmtree(case_dir.result, ignore_errors=True)


def _finish() -> None:
    dist.destroy_process_group()



if __name__ == "__main__":
    exit_status.exit_now(main())
