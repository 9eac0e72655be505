"""The history store: one SQLite file that every run appends its verdicts to, read back as pandas tables.

    store = Store("history.sqlite")          # created on first use (schema packcheck.history/1)
    store.append(entry)                      # one run (harness/history/entry.py): a transaction, all or nothing
    history = store.read()                   # runs, verdicts, quantities as DataFrames (pd.read_sql)

SQLite through the standard library: one file, no server, no new dependency (DuckDB would add a ~40 MB wheel for
tables of a few thousand rows), and appends from several processes at once (pytest-xdist's controller, bisect steps,
two CI jobs sharing a cache) are safe: write-ahead logging, and a busy timeout so a writer waits for another's
transaction instead of failing. Nothing is pickled: every column is text or a number, environments are JSON text.

Tables (docs/history.md has every column):
    meta        key, value: `schema` = packcheck.history/1
    runs        one per run: when, where from (source: run | pytest | bisect | import | kernels), the command, packcheck's
                version and commit, the environment as JSON and its key parts as columns (torch, cuda, transformers, ...)
    verdicts    one per verdict of a run: the cell (engine, family, scenario, dtype, device, attention), the engine's
                spec, version, commit and the commit's depth (its place along the history), status, known finding, max margin and the worst comparison
    quantities  one per verdict and quantity: the largest margin over that quantity's comparisons, how many, how many failed
"""

from __future__ import annotations

import json
import math
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.errors import InputError

SCHEMA = "packcheck.history/1"
BUSY_SECONDS = 30.0  # a writer waits this long for another's transaction (a pytest controller, a bisect step)
CELL = ("engine", "family", "scenario", "dtype", "device", "attention")
# the environment's parts kept as columns of `runs` (all of it is in `environment`, JSON): what a step is traced to
ENVIRONMENT_COLUMNS = ("torch", "cuda", "transformers", "accelerate", "flash_attn", "fla", "trl", "verl", "numpy", "gpu", "cpu",
                       "cpu_capability", "python")
RUN_COLUMNS = ("uid", "time", "recorded", "source", "command", "directory", "note", "packcheck", "packcheck_commit", "device",
               "device_name", *ENVIRONMENT_COLUMNS, "environment", "provenance")
VERDICT_COLUMNS = (*CELL, "engine_spec", "engine_version", "engine_commit", "engine_commit_depth", "status", "known_finding", "max_margin", "worst_quantity",
                   "worst_item", "worst_metric", "worst_observed", "worst_threshold", "comparisons", "failing", "seconds")
QUANTITY_COLUMNS = (*CELL, "quantity", "max_margin", "comparisons", "failing")
REAL = {"max_margin", "worst_observed", "worst_threshold", "seconds"}
INTEGER = {"comparisons", "failing", "engine_commit_depth"}


def _table(name: str, columns: tuple[str, ...], first: str) -> str:
    typed = ", ".join(f"{c} {'REAL' if c in REAL else 'INTEGER' if c in INTEGER else 'TEXT'}" for c in columns)
    return f"CREATE TABLE IF NOT EXISTS {name} ({first}, {typed})"


TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    _table("runs", RUN_COLUMNS, "id INTEGER PRIMARY KEY").replace("uid TEXT", "uid TEXT NOT NULL UNIQUE"),
    _table("verdicts", VERDICT_COLUMNS, "run_id INTEGER NOT NULL REFERENCES runs(id)"),
    _table("quantities", QUANTITY_COLUMNS, "run_id INTEGER NOT NULL REFERENCES runs(id)"),
    "CREATE INDEX IF NOT EXISTS verdicts_run ON verdicts (run_id)",
    "CREATE INDEX IF NOT EXISTS quantities_run ON quantities (run_id)",
)


class StoreProblem(InputError):
    """A store that cannot be read or written: the message names the file and what is wrong."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """One run as the store keeps it: `run` (RUN_COLUMNS but uid, which the store derives), its verdicts and quantities
    (VERDICT_COLUMNS, QUANTITY_COLUMNS), each a dict of column -> value (harness/history/entry.py makes them)."""

    run: dict
    verdicts: tuple[dict, ...]
    quantities: tuple[dict, ...]

    def uid(self) -> str:
        """What makes a run the same run: its provenance and its verdicts' cells and outcomes, not what the recorder added
        (a run recorded when it ended and imported from its directory later is kept once)."""
        import hashlib

        judged = [[v.get(c) for c in (*CELL, "status", "max_margin", "comparisons", "failing")] for v in self.verdicts]
        body = json.dumps([self.run.get("provenance"), judged], sort_keys=True, default=str)
        return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class History:
    """The store as pandas tables: `runs` (id + RUN_COLUMNS), `verdicts` and `quantities` (run_id + their columns).
    Margins are floats (inf where the allowed error was 0; NaN where none was measured)."""

    path: Path
    runs: object  # pandas.DataFrame
    verdicts: object
    quantities: object


def _number(value):
    """A float for a REAL column: results.json writes inf and NaN as strings; None stays NULL."""
    if value is None or value == "":
        return None
    value = float(value)
    return None if math.isnan(value) else value


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def _connect(self) -> sqlite3.Connection:
        if self.path.exists() and not self.path.is_file():
            raise StoreProblem(f"history store {self.path} is not a file (a folder?): give --history a file path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
            connection.execute("PRAGMA journal_mode=WAL")  # readers never block the writer, writers queue (busy timeout)
            connection.execute(f"PRAGMA busy_timeout={int(BUSY_SECONDS * 1000)}")
        except sqlite3.Error as err:
            raise StoreProblem(f"history store {self.path} is not a packcheck history store (SQLite cannot open it: {err}): "
                               "give --history another file") from None
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """Create the tables in a new file; refuse a file of another schema."""
        try:
            with connection:
                for statement in TABLES:
                    connection.execute(statement)
                connection.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA,))
            found = connection.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreProblem(f"history store {self.path} is not a packcheck history store ({err}): give --history another file") from None
        if found is None or found[0] != SCHEMA:
            raise StoreProblem(f"history store {self.path} has schema {found[0] if found else None!r}; this packcheck reads {SCHEMA!r}")

    def append(self, entry: Entry) -> bool:
        """Add one run, in one transaction; False if the store holds it already (the same provenance and verdicts)."""
        with closing(self._connect()) as connection:
            self._prepare(connection)
            run = {c: entry.run.get(c) for c in RUN_COLUMNS} | {"uid": entry.uid()}
            try:
                with connection:
                    cursor = connection.execute(f"INSERT OR IGNORE INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                                                [run[c] for c in RUN_COLUMNS])
                    if cursor.rowcount == 0:
                        return False
                    run_id = cursor.lastrowid
                    for table, columns, records in (("verdicts", VERDICT_COLUMNS, entry.verdicts), ("quantities", QUANTITY_COLUMNS, entry.quantities)):
                        connection.executemany(
                            f"INSERT INTO {table} (run_id, {', '.join(columns)}) VALUES (?, {', '.join('?' * len(columns))})",
                            [[run_id, *(_number(r.get(c)) if c in REAL else r.get(c) for c in columns)] for r in records])
            except sqlite3.Error as err:
                raise StoreProblem(f"history store {self.path}: cannot append ({err})") from None
            return True

    def read(self) -> History:
        """Every run, verdict and quantity, as DataFrames in the order they were added; a missing file is a StoreProblem."""
        import pandas as pd

        if not self.path.is_file():
            raise StoreProblem(f"history store {self.path} does not exist: record runs into it first (packcheck run --history "
                               f"{self.path}, or packcheck history --store {self.path} --import RUN_DIR)")
        with closing(self._connect()) as connection:
            self._prepare(connection)
            tables = {name: pd.read_sql(f"SELECT * FROM {name} ORDER BY {'id' if name == 'runs' else 'rowid'}", connection)
                      for name in ("runs", "verdicts", "quantities")}
        for name in ("verdicts", "quantities"):
            tables[name]["max_margin"] = tables[name]["max_margin"].astype(float)  # NULL (no comparison) is NaN
        return History(path=self.path, **tables)
