"""Rows built on a background thread: while the GPU runs step s, the host builds (and pins) step s+1's
rows with the reference's own row builder (step.build_micro_batches), so the 60-70 ms it takes for
8 x 4096 tokens leaves the step's critical path. `waited_s` records how long each step still waited.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import fields
from typing import Sequence

from packcheck.harness.contract import Case
from packcheck.impls.reference.pipeline import Pipeline
from packcheck.impls.reference.predictions import Predictions
from packcheck.impls.reference.step import build_micro_batches


def pinned(p: Predictions) -> Predictions:
    return Predictions(**{f.name: None if getattr(p, f.name) is None else getattr(p, f.name).pin_memory() for f in fields(p)})


class RowPrefetcher:
    def __init__(self, cases: Sequence[Case], pipe: Pipeline, pin: bool, depth: int = 2):
        self.cases, self.pipe, self.pin = list(cases), pipe, pin
        self.ready: queue.Queue = queue.Queue(maxsize=depth)
        self.waited_s: list[float] = []
        self.taken = 0
        self.thread = threading.Thread(target=self._build, name="row-prefetch", daemon=True)
        self.thread.start()

    def _build(self) -> None:
        for case in self.cases:
            try:
                micro_batches = build_micro_batches(case, self.pipe)
                if self.pin:
                    micro_batches = [[pinned(p) for p in forwards] for forwards in micro_batches]
                self.ready.put(micro_batches)
            except BaseException as err:  # noqa: BLE001 -- handed to the training thread, which raises it
                self.ready.put(err)
                return

    def next(self, step: int) -> list[list[Predictions]]:
        """Step `step`'s rows (steps are taken in order)."""
        if step != self.taken:
            raise ValueError(f"rows of step {step} asked for, but the prefetcher's next step is {self.taken}")
        tick = time.perf_counter()
        item = self.ready.get()
        self.waited_s.append(time.perf_counter() - tick)
        self.taken += 1
        if isinstance(item, BaseException):
            raise item
        return item
