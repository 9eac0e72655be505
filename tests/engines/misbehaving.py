"""Engines that misbehave the way real ones do: hang in a step, crash, or return garbage."""

from __future__ import annotations

import time

from packcheck.impls.reference.engine import ReferenceEngine


class HangsOnPackedRows(ReferenceEngine):
    """Deadlocks (sleeps forever) as soon as it is handed a packed layout."""

    name = "hangs_on_packed_rows"

    def run(self, case):
        if case.layout.kind.value == "packed":
            time.sleep(3600)
        return super().run(case)


class CrashesOnStackedRows(ReferenceEngine):
    name = "crashes_on_stacked_rows"

    def run(self, case):
        if case.layout.kind.value == "stacked":
            raise RuntimeError("CUDA error: an illegal memory access was encountered <script>alert(1)</script>")
        return super().run(case)
