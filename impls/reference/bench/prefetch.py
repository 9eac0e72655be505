"""Rows built in a separate process: while the GPU runs step s, a worker process builds the rows of
the next steps with the reference's own row builder (train_step.build_micro_batches), so the 60-70 ms of
Python they take for 8 x 4096 tokens leave the step's critical path. A process, not a thread: a
thread would hold the GIL the training thread (and autograd's, which runs the compiled backward and
the chunked log-prob's backward in Python) needs for every op it launches.

The rows cross the process boundary by value, as NumPy arrays through a pipe (about 2 MB a step;
no shared-memory file descriptors, which need the sender alive and room in /dev/shm); the training
process puts them in pinned memory, so their host-to-device copies are fast. `waited_s` records
how long each step still waited for its rows.
"""

from __future__ import annotations

import queue
import time
import traceback
from dataclasses import fields
from typing import Sequence

import torch
import torch.multiprocessing as mp

from packcheck.harness.contract import Case
from packcheck.impls.reference.data.predictions import Predictions

WAIT_S = 600.0


def as_arrays(p: Predictions) -> dict:
    """A text model's Predictions as NumPy arrays (picklable by value)."""
    if p.images is not None:
        raise ValueError("the row-building process carries text rows only")
    return {f.name: None if getattr(p, f.name) is None else getattr(p, f.name).numpy() for f in fields(p)}


def from_arrays(arrays: dict, pin: bool) -> Predictions:
    def tensor(a):
        t = torch.from_numpy(a)
        return t.pin_memory() if pin else t

    return Predictions(**{name: None if a is None else tensor(a) for name, a in arrays.items()})


def _pipeline(name: str):
    from packcheck.impls.reference.fast import FAST_PIPELINE
    from packcheck.impls.reference.step.pipeline import REFERENCE

    return {"reference": REFERENCE, "reference.fast": FAST_PIPELINE}[name]


def _build(cases: list[Case], pipeline: str, ready) -> None:
    """The worker: every case's rows, in order, into `ready` (a bounded queue: at most its size ahead)."""
    from packcheck.impls.reference.step.train_step import build_micro_batches

    torch.set_num_threads(1)
    try:
        pipe = _pipeline(pipeline)
        for case in cases:
            ready.put(("rows", [[as_arrays(p) for p in forwards] for forwards in build_micro_batches(case, pipe)]))
    except BaseException:  # noqa: BLE001 -- handed to the training process, which raises it
        ready.put(("error", traceback.format_exc()))


class RowPrefetcher:
    def __init__(self, cases: Sequence[Case], pipeline: str, pin: bool, depth: int = 2):
        """`pin`: rows into pinned memory, for a CUDA run."""
        self.pin = pin
        self.waited_s: list[float] = []
        self.taken = 0
        # on CUDA a fresh interpreter (no fork of a process holding a CUDA context and compile threads); on the CPU a fork starts at once
        context = mp.get_context("spawn" if pin else "fork")
        self.ready = context.Queue(maxsize=depth)
        self.worker = context.Process(target=_build, args=(list(cases), pipeline, self.ready), name="row-prefetch", daemon=True)
        self.worker.start()

    def next(self, step: int) -> list[list[Predictions]]:
        """Step `step`'s rows (steps are taken in order)."""
        if step != self.taken:
            raise ValueError(f"rows of step {step} asked for, but the prefetcher's next step is {self.taken}")
        tick = time.perf_counter()
        while True:
            try:
                kind, item = self.ready.get(timeout=1.0)
                break
            except queue.Empty:
                if not self.worker.is_alive() or time.perf_counter() - tick > WAIT_S:
                    raise RuntimeError(f"the row-building process stopped (exit code {self.worker.exitcode}) before step {step}'s rows") from None
        self.waited_s.append(time.perf_counter() - tick)
        self.taken += 1
        if kind == "error":
            raise RuntimeError(f"building step {step}'s rows failed in the row-building process:\n{item}")
        return [[from_arrays(p, self.pin) for p in forwards] for forwards in item]

    def close(self) -> None:
        if self.worker.is_alive():
            self.worker.terminate()
        self.worker.join(timeout=10)
        self.ready.close()
