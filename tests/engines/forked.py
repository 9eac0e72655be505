"""The reference, reporting in its result's notes what its process started with: for tests/test_zygote.py, which
checks that a rank forked from the zygote starts as a fresh `python -m` process would have."""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import torch

from packcheck.impls.reference.engine import ReferenceEngine


class ReportsItsProcess(ReferenceEngine):
    name = "reference.reports-its-process"

    def run(self, case):
        result = super().run(case)
        notes = {"threads": torch.get_num_threads(), "omp": os.environ.get("OMP_NUM_THREADS"), "numpy": float(np.random.rand()),
                 "argv": sys.argv, "sid": os.getsid(0), "pid": os.getpid(), "path": sys.path[:3], "cwd": os.getcwd(),
                 "setting": os.environ.get("PACKCHECK_SOMETHING"),
                 "frozen": gc.get_freeze_count()}
        if result is not None:
            result.notes = {**result.notes, "process": notes}
        return result
