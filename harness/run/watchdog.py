"""A per-verdict watchdog for in-process engines: a hung engine still ends as a verdict.

If a verdict takes longer than `seconds`, the watchdog thread captures every thread's Python
stack, hands it to `on_timeout` (which records an error verdict and writes the partial results
and report), and ends the process with exit status 1: the step cannot be interrupted from
Python, but the job never hangs. Multi-process runs get a per-rank watchdog from the launcher.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import Callable

from packcheck.harness.launch.stacks import thread_stacks

TIMEOUT_EXIT_STATUS = 1


class Watchdog:
    def __init__(self, seconds: float, on_timeout: Callable[[str], None]):
        self.seconds = seconds
        self.on_timeout = on_timeout
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        try:
            self.on_timeout(thread_stacks())
        except BaseException:  # noqa: BLE001 - report it, but the process must still end
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(TIMEOUT_EXIT_STATUS)

    def __enter__(self) -> Watchdog:
        if self.seconds > 0:
            self._timer = threading.Timer(self.seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
