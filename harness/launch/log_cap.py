"""A cap on what an engine's prints leave on disk: each rank's stdout and stderr logs keep their last
TAIL_BYTES once they pass CAP_BYTES (50 MB of prints once left 153 MB under --out).

Torch elastic opens a rank's log files for writing at an offset; `append_mode` reopens them in
append mode in the rank itself, so that cutting a file (`trim_logs`, from the rank's watchdog thread)
sends the next writes to its new end instead of leaving a hole where the cut part was. A cut log
starts with one line naming the cap; lines printed while it is cut may be lost with the cut part.
"""

from __future__ import annotations

import os

CAP_BYTES = 8 * 1024 * 1024  # per stream per rank: far above what a real engine prints in a run
TAIL_BYTES = 1024 * 1024  # what a cut log keeps: the last lines, where a traceback is
MARK = "[packcheck: this log went over its cap of"


def append_mode() -> None:
    """Reopen stdout and stderr in append mode where they are regular files (torch elastic's logs)."""
    for fd in (1, 2):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
            if not os.path.isfile(path):
                continue
            reopened = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError:  # no /proc, a terminal, a pipe: nothing to reopen
            continue
        os.dup2(reopened, fd)
        os.close(reopened)


_dropped = {1: 0, 2: 0}  # bytes of the engine's output cut from each stream so far, said again at the top of each cut
_head = {1: 0, 2: 0}  # the length of the line naming the cap at the top of each stream's file


def trim_logs() -> None:
    """Cut stdout's and stderr's files to their last TAIL_BYTES, behind a line naming the cap, once over CAP_BYTES."""
    for fd in (1, 2):
        try:
            size = os.fstat(fd).st_size
            if size <= CAP_BYTES or not os.path.isfile(path := os.readlink(f"/proc/self/fd/{fd}")):
                continue
            with open(path, "rb") as log:
                log.seek(size - TAIL_BYTES)
                tail = log.read(TAIL_BYTES)
            tail = tail[tail.find(b"\n") + 1:]  # from the start of a line
            _dropped[fd] += size - _head[fd] - len(tail)
            head = (f"{MARK} {CAP_BYTES // 2**20} MiB per rank and stream; packcheck dropped its first "
                    f"{_dropped[fd]:,} bytes and keeps the last {TAIL_BYTES // 2**20} MiB]\n").encode()
            _head[fd] = len(head)
            # written over the start through a descriptor of its own, then cut there: the engine's descriptors append,
            # so what it prints meanwhile lands past the cut (lost) or after it, never before the line naming the cap
            with open(path, "r+b") as log:
                log.write(head + tail)
                log.truncate()
        except OSError:
            continue
