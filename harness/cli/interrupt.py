"""SIGINT and SIGTERM as an exception, from the CLI's first moment: standard library only, so that it is in place
before the commands are imported and a launching command's zygote imports torch (3 s, during which a signal once gave
a KeyboardInterrupt traceback and exit 130, or a silent exit 143).

    previous = catch_signals()   # SIGINT and SIGTERM raise Interrupted wherever the process is
    restore(previous)            # the handlers as they were
    hold_signals()               # the run is stopping: a second signal must not cut its cleanup short
"""

from __future__ import annotations

import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """SIGINT or SIGTERM: stop the run, keep what it judged. Raised by the handler wherever the run is, between two
    Python steps (inside a verdict's judgement, between two tensors: a single torch operation finishes first), so
    it is a BaseException like KeyboardInterrupt: the `except Exception` that turns a crashing judge into an error
    verdict (harness/run/judge.py) let an 8B judgement swallow it, and the run went on to the next scenario's arms
    until it was killed (docs/gpu.md, 2026-12-02 evening)."""


def raise_interrupted(signum, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def catch_signals() -> dict:
    return {sig: signal.signal(sig, raise_interrupted) for sig in SIGNALS}


def restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def hold_signals() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
