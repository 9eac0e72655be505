"""The per-rank watchdog: a rank that hangs, or whose peer failed, ends with a report, never a hang.

One thread per rank for the whole launch. While a case is armed it stops the process when
  - the case ran past its timeout on this rank (a hung collective, a slow engine): "timeout";
  - another rank of the launch failed the case (raised or timed out): "peer_failed";
  - another rank's process ended in the middle of the case without a report (os._exit(0), sys.exit in
    a thread, a signal): "peer_exited", at once rather than at the timeout, naming that rank;
and at any time when the agent that started this rank is gone. It also keeps the rank's logs under
their cap (log_cap.py). Stopping writes the rank's report
into the case directory (why, whether engine.run had returned, the collective log with the call
it waits in, every thread's Python stack), tells the other ranks through the store, waits a
moment for their reports so that none is torn down half-written, and ends the process with a
distinctive exit status; the elastic agent then tears the launch down.

The main thread blocked in gloo releases the GIL, so this thread runs. Where a blocked call holds
the GIL (some CUDA synchronisations), faulthandler writes the stacks to `stacks.rank<r>.txt`
without it: when the agent tears the rank down (SIGTERM), or, if every rank is stuck that way,
from its own timer a little after the timeout, which also ends the process.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import NoReturn

from packcheck.harness.collectives import CollectiveRecorder
from packcheck.harness.files import write_json_atomically
from packcheck.harness.launch import exit_status
from packcheck.harness.launch.layout import CaseDir, LaunchDir
from packcheck.harness.launch.log_cap import trim_logs
from packcheck.harness.launch.process_tree import alive
from packcheck.harness.launch.raised import raised
from packcheck.harness.launch.rank_sync import RankSync
from packcheck.harness.launch.stacks import thread_stacks

POLL_SECONDS = 0.05  # while a case is armed
IDLE_POLL_SECONDS = 0.25  # between cases, only whether the agent is gone (the rank also dies with it: exit_status.die_with_parent)
EXIT_STATUS = {"timeout": exit_status.RANK_TIMED_OUT, "peer_failed": exit_status.PEER_FAILED, "raised": exit_status.ENGINE_RAISED,
               "peer_exited": exit_status.PEER_FAILED}


class RankWatchdog:
    def __init__(self, rank: int, world_size: int, run_id: str, timeout: float, recorder: CollectiveRecorder):
        self.rank, self.world_size, self.run_id = rank, world_size, run_id
        self.timeout = timeout
        self.grace = min(5.0, timeout / 2)  # how long a stopping rank waits for the others' reports
        self.recorder = recorder
        self._parent = os.getppid()
        self._lock = threading.Lock()  # guards the armed case against a concurrent disarm
        self._stopping = threading.Lock()  # the first thread to stop the process writes the report
        self._case: tuple[int, CaseDir, str] | None = None
        self._started = 0.0
        self._engine_returned = False
        self._stacks_file = None
        self._exited_rank: int | None = None  # "peer_exited": the rank whose process ended
        self._peer_pids: dict[int, int] = {}
        self._thread = threading.Thread(target=self._watch, name="packcheck-rank-watchdog", daemon=True)

    def start(self) -> RankWatchdog:
        self._thread.start()
        return self

    # -- the case the main thread is in ---------------------------------------------------

    def arm(self, index: int, case_dir: CaseDir, case_name: str) -> None:
        with self._lock:
            self._case = (index, case_dir, case_name)
            self._started = time.monotonic()
            self._engine_returned = False
            self._stacks_file = open(case_dir.stacks(self.rank), "w")  # noqa: SIM115 - open for the whole case
            faulthandler.dump_traceback_later(self.timeout + self.grace + 1.0, exit=True, file=self._stacks_file)
            faulthandler.register(signal.SIGTERM, file=self._stacks_file, all_threads=True, chain=True)

    def engine_returned(self) -> None:
        self._engine_returned = True

    def disarm(self) -> None:
        with self._stopping, self._lock:  # blocks for good if the watchdog is already stopping the process
            faulthandler.cancel_dump_traceback_later()
            faulthandler.unregister(signal.SIGTERM)
            self._stacks_file.close()
            os.unlink(self._stacks_file.name)
            self._case = None

    # -- stopping -------------------------------------------------------------------------

    def stop(self, reason: str, error: BaseException | None = None) -> NoReturn:
        """Write this rank's report for the armed case, tell the other ranks, wait briefly for
        their reports, and end the process."""
        self._stopping.acquire()
        self._report_and_exit(reason, error)

    def _stop_if_still_armed(self, case: tuple, reason: str, exited_rank: int | None = None) -> None:
        self._stopping.acquire()
        if self._case is not case:  # the main thread finished the case meanwhile
            self._stopping.release()
            return
        self._exited_rank = exited_rank
        self._report_and_exit(reason, None)

    def _report_and_exit(self, reason: str, error: BaseException | None) -> NoReturn:
        try:
            index, case_dir, case_name = self._case
            sync = RankSync(self.rank, self.world_size, self.run_id)
            first_failure = sync.announce_failure(index) if reason != "peer_failed" else sync.failed_rank(index)
            write_json_atomically(case_dir.report(self.rank), {
                "rank": self.rank,
                "case": case_name,
                "reason": reason,
                "time": time.time(),
                "elapsed": time.monotonic() - self._started,
                "timeout": self.timeout,
                "engine_returned": self._engine_returned,
                "first_failed_rank": first_failure,
                "exited_rank": self._exited_rank,
                "collectives": self.recorder.snapshot(),
                "stacks": thread_stacks(),
                "error": None if error is None else raised(error),
            })
            sync.wait_all(f"final/{index}", seconds=self.grace)
        except BaseException:  # noqa: BLE001 - into the rank's stderr log; the process must still end
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(EXIT_STATUS[reason])

    def _watch(self) -> None:
        sync = None
        while True:
            time.sleep(POLL_SECONDS if self._case is not None else IDLE_POLL_SECONDS)
            if os.getppid() != self._parent:
                os._exit(exit_status.ORPHANED)
            trim_logs()
            with self._lock:
                armed = self._case
                overdue = armed is not None and time.monotonic() - self._started > self.timeout
            if armed is None:
                continue
            try:
                sync = sync or RankSync(self.rank, self.world_size, self.run_id)
                failed = sync.failed_rank(armed[0])
            except RuntimeError:  # the store went away with the agent
                os._exit(exit_status.ORPHANED)
            if overdue:
                self._stop_if_still_armed(armed, "timeout")
            elif failed is not None and failed != self.rank:
                self._stop_if_still_armed(armed, "peer_failed")
            elif (exited := self._exited_peer(armed[1])) is not None:
                self._stop_if_still_armed(armed, "peer_exited", exited)

    def _exited_peer(self, case_dir: CaseDir) -> int | None:
        """A rank of this launch whose process has ended while it had neither finished this case nor reported on it."""
        launch = LaunchDir(case_dir.path.parent.parent)
        for rank in range(self.world_size):
            if rank == self.rank:
                continue
            if rank not in self._peer_pids:
                try:
                    self._peer_pids[rank] = int(json.loads(launch.pid(rank).read_text())[0])
                except (OSError, ValueError, TypeError, IndexError):
                    continue
            if not alive(self._peer_pids[rank]) and not case_dir.done(rank).exists() and not case_dir.report(rank).exists():
                return rank
        return None
