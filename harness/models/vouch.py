"""Checkpoint digests a harness process hands to the harness processes it starts, so that they need not check the
same cache entries against their seeds again.

    env = {**os.environ, **vouching_env()}   # in the parent: every entry it wrote or checked against its seed, with
                                             # the digests it computed (harness/models/cache_seal.py)
    accept_vouched(entry) -> bool            # in the child: True when its parent vouched for `entry` and the entry's
                                             # files hash to those digests now; they are then held as its own

A process trusts only digests it computed itself, never those recorded on disk, which any process of the user (an
engine's included) can write (cache_seal.py). An environment is not a file: a process's is set by whoever starts it,
so digests in it come from the process that started this one, which computed them (today the test suite, for the
CLI runs its tests start: conftest.py; `packcheck bisect` could for its steps' runs, and does not yet). An entry changed since (by an engine of an earlier run) hashes to other
digests and is checked against its seed as before.

Why: the seed check builds the model on the meta device with transformers, about 4 s of CPU per process at the tiny
size (importing transformers' models), a draw as long as a build at 0.6b and a GPU draw plus a 16 GB read at 8B, once
per process that uses the entry; a process started by one that already checked the entry pays a hash instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from packcheck.harness.models.cache_seal import hashed, held, record

VOUCHED = "PACKCHECK_VOUCHED_CHECKPOINTS"


def vouching_env() -> dict[str, str]:
    """The environment entry that vouches for every cache entry this process holds digests of (none: empty)."""
    entries = held()
    return {VOUCHED: json.dumps(entries, sort_keys=True)} if entries else {}


def accept_vouched(entry: Path) -> bool:
    """True when the process that started this one vouched for `entry` (vouching_env) and its files hash to those digests;
    this process then holds them as its own. False otherwise (not vouched for, or changed since): check it."""
    try:
        vouched = json.loads(os.environ.get(VOUCHED, "{}")).get(str(entry))
    except (ValueError, AttributeError):
        return False
    if not isinstance(vouched, dict):
        return False
    try:
        found, stats = hashed(entry)
    except OSError:
        return False
    if found != vouched:
        return False
    record(entry, found, stats)
    return True
