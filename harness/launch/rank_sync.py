"""Coordination between the ranks of one launch, through the launcher's TCP store.

Never through the process group under test: an engine whose ranks issued different collectives
leaves that group desynchronised, and its next collective would pair with the wrong one. Every
call here is a quick store request, so a thread can use it while the main thread is blocked in a
collective. Each thread opens its own connection.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch.distributed as dist

POLL_SECONDS = 0.005


class RankSync:
    def __init__(self, rank: int, world_size: int, run_id: str, timeout: float = 60.0):
        self.rank, self.world_size = rank, world_size
        client = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                               timeout=timedelta(seconds=timeout))
        self.store = dist.PrefixStore(f"packcheck/{run_id}/", client)

    def arrive(self, point: str) -> None:
        self.store.set(f"{point}/{self.rank}", "1")

    def arrived(self, point: str) -> list[int]:
        return [r for r in range(self.world_size) if self.store.check([f"{point}/{r}"])]

    def wait_all(self, point: str, seconds: float | None = None) -> bool:
        """Arrive at `point` and wait for every rank (at most `seconds`): True if all arrived."""
        self.arrive(point)
        keys = [f"{point}/{r}" for r in range(self.world_size)]
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.store.check(keys):
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def announce_failure(self, case_index: int) -> int:
        """Record that this rank failed the case; returns the rank that failed it first."""
        return int(self.store.compare_set(f"failed/{case_index}", "", str(self.rank)))

    def failed_rank(self, case_index: int) -> int | None:
        key = f"failed/{case_index}"
        return int(self.store.get(key)) if self.store.check([key]) else None
