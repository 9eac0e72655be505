"""Old run directories into the history store: `packcheck history --store PATH --import RUN_DIR ...`.

A run directory (`packcheck run --out`, the pytest plugin's `--out`) is read as every report reads it (results.json, or
what results.jsonl kept of a run that never finished) and recorded with source `import`. Its environment is what its
provenance says (torch, transformers, the CPU and its kernel path, the device); the engine's version is not known for
a run recorded before the store existed. Importing a run the store holds already (recorded when it ran, or imported
before) adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.history.entry import entry_of
from packcheck.harness.history.store import Store
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.results import load_results


def import_run(store: Store, directory: str | Path) -> str:
    """Record the run in `directory`; a line saying what was done. A directory that holds no readable run raises
    ResultsProblem (an InputError) naming it."""
    directory = Path(directory).absolute()
    data = load_results(RunDir(directory))
    entry = entry_of(data, source="import", directory=str(directory), note="unfinished" if data.get("unfinished") else "")
    added = store.append(entry)
    return (f"imported {directory}: {len(entry.verdicts)} verdicts" if added
            else f"{directory}: the store holds this run already; not added again")
