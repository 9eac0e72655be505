"""Calls made on a thread that lasts as long as the process. A child that asks the kernel to signal it when its parent
dies (PR_SET_PDEATHSIG: the zygote, harness/launch/zygote.py) is signalled when the *thread* that started it ends, not
the process: a zygote started by the first launch of a short-lived thread (a library caller's, a test's) was sent
SIGTERM as that thread ended and took every launch of the process with it (issue 48 item 8: a reference rank got
SIGTERM 0.6 s into a case with no shutdown under way). So a zygote is started from the main thread, or from here.

    process = on_lasting_thread(lambda: subprocess.Popen(...))   # the call's value, or its exception raised here
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, TypeVar

T = TypeVar("T")
_calls: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def on_lasting_thread(call: Callable[[], T]) -> T:
    """`call()` on the main thread when that is the caller's, else on one daemon thread that never ends (a daemon thread
    is not joined at exit: it lasts until the process does)."""
    if threading.current_thread() is threading.main_thread():
        return call()
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="packcheck-lasting", daemon=True)
            _thread.start()
    answer: queue.SimpleQueue = queue.SimpleQueue()
    _calls.put((call, answer))
    ok, value = answer.get()
    if not ok:
        raise value
    return value


def _serve() -> None:
    while True:
        call, answer = _calls.get()
        try:
            answer.put((True, call()))
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
            answer.put((False, err))
