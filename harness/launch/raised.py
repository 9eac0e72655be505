"""An exception caught in an engine's process, as the data its report carries to the parent: the kind the
harness acts on, decided here by isinstance while the exception still exists, and its class, message and
traceback, for people only (nothing reads a kind back from a class name).

    ErrorKind.UNSUPPORTED_CASE   the engine raised UnsupportedCase (for a case it declares supported: an error)
    ErrorKind.ENGINE_NOT_FOUND   the spec names no engine here: an EngineNotFound from resolving it
    ErrorKind.BUILD_TIMEOUT      importing or constructing the engine outlasted --timeout (the parent's finding, no exception)
    ErrorKind.OTHER              anything else an engine or its start-up raised
"""

from __future__ import annotations

import traceback
from enum import StrEnum

from packcheck.harness.engines import EngineNotFound, UnsupportedCase


class ErrorKind(StrEnum):
    UNSUPPORTED_CASE = "unsupported_case"
    ENGINE_NOT_FOUND = "engine_not_found"
    BUILD_TIMEOUT = "build_timeout"
    OTHER = "other"


def error_kind(err: BaseException) -> ErrorKind:
    if isinstance(err, UnsupportedCase):
        return ErrorKind.UNSUPPORTED_CASE
    if isinstance(err, EngineNotFound):
        return ErrorKind.ENGINE_NOT_FOUND
    return ErrorKind.OTHER


def raised(err: BaseException) -> dict:
    """What a rank's report says of `err`: its kind, and its class's dotted name, message and traceback for people."""
    return {"kind": error_kind(err).value, "type": f"{type(err).__module__}.{type(err).__qualname__}", "message": str(err),
            "traceback": "".join(traceback.format_exception(err))}
