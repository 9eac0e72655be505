"""The run's progress on the console: which cell runs, how many of how many, the time so far and an ETA.

On a terminal, one status line is rewritten in place while a cell runs, every second ("[3/24] reference
llama mask_alignment ... 12s | 2/24 done, elapsed 1m02s, ETA ~11m"); each verdict's line (and a failing
verdict's report) is printed above it and stays. Anywhere else (CI logs, pipes, files) nothing is
rewritten: plain lines, each cell's "[k/N] engine family scenario ... STATUS ..." ending with the
elapsed time and the ETA.

ETA = the wall time per unit of work finished so far x the work left (the running cell counted at what
that rate leaves of it, 0 once it outlasts it). A cell's work is its scenario's arms (`Scenario.disk_arms`, the arms
with a result per verdict): an RL cell of 45 arms is not extrapolated at the pace of a 3-arm one, so the first ETA of
a matrix is not a fifth of its time. N is exact once every engine has started (the families an engine declares are
known then); until then an engine not yet started counts as the families asked for (or every family) x the scenarios.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Callable, TextIO

CLEAR_LINE = "\r\x1b[K"  # back to the start of the line and erase it
REFRESH_SECONDS = 1.0


def eta_seconds(elapsed: float, done: float, total: float, running: float = 0.0, running_work: float = 1.0) -> float | None:
    """Seconds left at the time per unit of work finished (`elapsed` when the last cell finished / `done` work): the
    work after the running cell at that rate, the running cell (`running_work` of it, `running` seconds in) at what
    the rate leaves of it; None before the first cell finishes. With every cell 1 unit: the mean time per cell."""
    if done <= 0:
        return None
    rate, left = elapsed / done, max(total - done, 0)
    if left == 0 or not running:
        return rate * left
    share = min(running_work, left)
    return rate * (left - share) + max(rate * share - running, 0.0)


def duration(seconds: float | None) -> str:
    """"42s", "3m05s", "1h02m"; "?" when unknown."""
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Progress of a matrix run on `out`; `tty` defaults to whether `out` is a terminal that takes escape sequences."""

    def __init__(self, out: TextIO, total: int, tty: bool | None = None, clock: Callable[[], float] = time.monotonic,
                 work: float | None = None):
        self.out, self.total, self.clock = out, total, clock
        self.work = float(total) if work is None else work  # the matrix's work (the module docstring); cells of 1 by default
        self.work_done = 0.0
        self.cell_work = 1.0
        self.tty = (out.isatty() and os.environ.get("TERM") != "dumb") if tty is None else tty  # a dumb terminal takes no escapes
        self.started = self.finished = clock()  # the run's start; when the last cell finished
        self.done = 0
        self.cell: str | None = None  # "[k/N] engine family scenario ..." while a cell runs
        self.cell_text = ""  # the last cell's, for its verdict line
        self.cell_started = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def recount(self, expected: int, actual: int, expected_work: float | None = None, actual_work: float | None = None) -> None:
        """An engine started: its cells (and their work) are `actual`, where `expected` had been counted for it."""
        self.total += actual - expected
        self.work += (actual if actual_work is None else actual_work) - (expected if expected_work is None else expected_work)

    def timing(self) -> str:
        now = self.clock()
        running = now - self.cell_started if self.cell is not None else 0.0
        eta = eta_seconds(self.finished - self.started, self.work_done, self.work, running, self.cell_work)
        return f"elapsed {duration(now - self.started)}, ETA {duration(eta)}"

    def start(self, engine: str, family: str, scenario: str, work: float = 1.0) -> None:
        with self._lock:
            self.cell = self.cell_text = f"[{self.done + 1}/{self.total}] {engine} {family} {scenario} ..."
            self.cell_started, self.cell_work = self.clock(), work
            if self.tty:
                self._draw()
            else:
                print(self.cell, end=" ", file=self.out, flush=True)
        if self.tty and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="packcheck-progress", daemon=True)
            self._ticker.start()

    def finish(self, line: str, report: str = "") -> None:
        """The cell's verdict `line` (and a failing verdict's `report` below it)."""
        with self._lock:
            self.done += 1
            self.work_done += self.cell_work
            self.finished, self.cell = self.clock(), None
            ended = f"{line} | {self.timing()}"
            text = f"{CLEAR_LINE}{self.cell_text} {ended}" if self.tty else ended
            print(text + (f"\n{report}" if report else ""), file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A line of its own (an engine that did not start), above the status line."""
        with self._lock:
            print((CLEAR_LINE if self.tty else "") + text, file=self.out, flush=True)
            if self.tty and self.cell is not None:
                self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.tty and self.cell is not None:
                print(CLEAR_LINE, end="", file=self.out, flush=True)

    def _draw(self) -> None:
        status = f"{self.cell} {duration(self.clock() - self.cell_started)} | {self.done}/{self.total} done, {self.timing()}"
        width = shutil.get_terminal_size().columns - 1  # a wrapped line could not be rewritten in place
        print(CLEAR_LINE + (status if len(status) <= width else status[:max(width - 3, 0)] + "..."), end="", file=self.out, flush=True)

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_SECONDS):
            with self._lock:
                if self.cell is not None:
                    self._draw()
