"""A verdict's status, and the one definition of which statuses are failures.

pass: every comparison within tolerance; fail: a comparison out of tolerance, or an invalid result;
unsupported: the engine declares it cannot run an arm; error: the engine (or packcheck's judge)
crashed; hang: a step did not finish within the timeout. A `str` enum: results.json, results.jsonl
and the reports write and compare the same text they always did.

XFAIL is no verdict's status: it is what a conformance cell records for the absolute-check rule
(harness/run/absolute.py) when the engine's known finding reproduced as pinned (a measured, named error).
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    HANG = "hang"
    UNSUPPORTED = "unsupported"
    XFAIL = "xfail"

    @property
    def failed(self) -> bool:
        """Whether it counts against the exit code: an out-of-tolerance or invalid result, a crash, a hang."""
        return self in FAILED

    @property
    def held(self) -> bool:
        """Whether the check held: a pass, or a known finding reproduced as pinned (the absolute-check rule's sense)."""
        return self in (Status.PASS, Status.XFAIL)


FAILED = frozenset({Status.FAIL, Status.ERROR, Status.HANG})
VERDICT_STATUSES = tuple(s for s in Status if s is not Status.XFAIL)  # what a verdict may say, in the order summaries count them


def counts_as_failed(text: str) -> bool:
    """Whether a status read from a results file counts as failed; one this packcheck does not know (a newer run's)
    counts as failed too, as anything that is not a pass or unsupported."""
    try:
        return Status(text).failed
    except ValueError:
        return True
