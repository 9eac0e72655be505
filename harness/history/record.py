"""Recording a run into the history store, from wherever it was judged: `packcheck run`, the pytest plugin, a bisect
probe, `packcheck kernels`, an imported run directory.

Where the store is: `--history PATH` (packcheck run and the plugin: harness/run/options.py; bisect, kernels), else the environment variable PACKCHECK_HISTORY,
else nowhere: nothing is recorded unless asked (a store that grows silently in the home directory of a CI machine is
lost with the machine anyway; a CI job keeps it as an artifact, docs/history.md).

Recording never breaks or changes a run: it happens after the run's files are written, and any failure (a locked, full
or foreign file) is one warning line, with the run's results and exit status as they were.
"""

from __future__ import annotations

import os
from pathlib import Path

from packcheck.harness.history.entry import entry_of
from packcheck.harness.history.store import Store

ENV_VAR = "PACKCHECK_HISTORY"


def store_path(given: str | None = None) -> Path | None:
    """The store a run records into: `given` (--history), else $PACKCHECK_HISTORY, else None (no recording)."""
    value = given or os.environ.get(ENV_VAR) or ""
    return Path(value).expanduser().absolute() if value.strip() else None


def record(path: Path, data: dict, *, source: str, directory: str = "", engines: dict | None = None, note: str = "",
           device: str = "cpu", measure: bool = True) -> tuple[bool, str]:
    """Append the run `data` (results.json's object) to the store at `path`; (recorded, the line to print). Never raises:
    a store that cannot take it gives (False, a warning). `measure`: take this process's environment (the run's own)
    over what its provenance says; an imported run passes False."""
    try:
        environment = None
        if measure:
            from packcheck.harness.provenance import environment as measured

            environment = measured(device)
        entry = entry_of(data, source=source, directory=directory, engines=engines, environment=environment, note=note)
        added = Store(path).append(entry)
    except Exception as err:  # noqa: BLE001 - a store problem never changes a run's outcome
        return False, f"warning: not recorded in the history store {path}: {type(err).__name__}: {err}"
    verdicts = len(entry.verdicts)
    return added, (f"history: {verdicts} verdict{'s' * (verdicts != 1)} recorded in {path}" if added
                   else f"history: {path} holds this run already; not added again")
