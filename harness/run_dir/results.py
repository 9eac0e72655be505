"""The run's results table, written as it grows: `results.jsonl` gets one line per verdict the
moment it is judged (a crash or a kill leaves every verdict before it), and `results.json`, the
whole table, is written once when the run ends or is interrupted (atomically: a reader never sees
half of it). Readers take results.json, or rebuild the table from results.jsonl when the run
never finished.

Schema `packcheck.results/1` (documented in docs/results-schema.md):
    provenance: versions, device, git commit, command, time, seed
    verdicts:   one per engine x family x scenario x dtype x device (status, diagnosis, reproduce, ...)
    rows:       one per engine x family x scenario x dtype x arms x quantity x item x metric,
                with observed, threshold, margin, passed, where
    resources:  the run's peak disk under its folder and peak memory (packcheck run only)
    damage:     each golden, noise floor or cached checkpoint an engine changed while the run ran (absent: none)
    properties: the pytest plugin's hypothesis property tests: each one's cell, outcome and message (absent: none ran)
results.jsonl: a first line {"schema", "provenance"}, then one {"verdict", "rows"} line per verdict.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Protocol, Sequence

from packcheck.harness.compare import Comparison
from packcheck.harness.compare.tolerances import table_json
from packcheck.harness.errors import InputError
from packcheck.harness.files import write_atomically
from packcheck.harness.run_dir.layout import RunDir
from packcheck.harness.run_dir.tables import write_tables

SCHEMA = "packcheck.results/1"
VERDICT_KEYS = ("engine", "family", "scenario", "dtype", "device", "attention")


def _finite(value):
    """JSON has no inf/NaN: write them as strings a reader maps back."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


class Judged(Protocol):
    """What the results record of a verdict (harness/run/verdict.py, Verdict): its cell (VERDICT_KEYS), its JSON and its
    comparisons. A protocol, not the Verdict: the run directory stands below the runner that concludes verdicts."""

    engine: str
    family: str
    scenario: str
    dtype: str
    device: str
    attention: str
    comparisons: Sequence[Comparison]

    def to_json(self) -> dict: ...


class ResultsFile:
    def __init__(self, run_dir: RunDir, provenance: dict):
        self.run_dir = run_dir
        run_dir.path.mkdir(parents=True, exist_ok=True)
        self.provenance = {"tolerances": table_json()} | provenance  # a run with --noise-floors records its own
        self.verdicts: list[Judged] = []
        self.records: list[dict] = []  # each verdict as JSON, in the order added
        run_dir.begin()  # marked as in progress, an earlier run's results forgotten: never read as this run's
        write_atomically(run_dir.results_lines, json.dumps({"schema": SCHEMA, "provenance": provenance}) + "\n")

    def add(self, verdict: Judged) -> None:
        self.verdicts.append(verdict)
        self.add_record(record_of(verdict))

    def add_record(self, record: dict) -> None:
        """One verdict as JSON ({"verdict", "rows"}: record_of), e.g. judged in a pytest-xdist worker of the plugin."""
        self.records.append(record)
        with open(self.run_dir.results_lines, "a", encoding="utf-8") as lines:
            lines.write(json.dumps(record) + "\n")
            lines.flush()
            os.fsync(lines.fileno())

    def table(self) -> dict:
        """The verdicts so far as results.json holds them: schema, provenance, verdicts, rows (what the history store records)."""
        return {"schema": SCHEMA, "provenance": self.provenance, "verdicts": [r["verdict"] for r in self.records],
                "rows": [row for r in self.records for row in r["rows"]]}

    def write(self, resources: dict | None = None, damage: list[str] | tuple[str, ...] = (), properties: Sequence[dict] = ()) -> None:
        """The whole table as results.json (at the end of the run, or when it is interrupted); `resources`: the run's
        peak disk and memory (harness/launch/usage.py), where measured; `damage`: each golden or cached checkpoint an
        engine changed during the run (harness/launch/pool.py), which keeps the run from being green; `properties`: the
        pytest plugin's hypothesis property tests, each one's outcome (conformance/run_directory.py)."""
        data = (self.table() | ({"resources": resources} if resources else {})
                | ({"damage": list(damage)} if damage else {}) | ({"properties": [_finite(p) for p in properties]} if properties else {}))
        write_atomically(self.run_dir.results, json.dumps(data, indent=1))
        write_tables(self.run_dir, data["verdicts"], data["rows"])  # the same records, one flat table per file
        write_atomically(self.run_dir.seal, json.dumps({path.name: _sha256(path) for path in (self.run_dir.results, self.run_dir.results_lines)}))
        self.run_dir.end()


def record_of(verdict: Judged) -> dict:
    """A verdict as results.jsonl writes it, JSON all through."""
    return {"verdict": _finite(verdict.to_json()), "rows": rows_of(verdict)}


def rows_of(verdict: Judged) -> list[dict]:
    return [_finite({key: getattr(verdict, key) for key in VERDICT_KEYS} | c.to_json())
            for c in verdict.comparisons]


class ResultsProblem(InputError):
    """A results file that cannot be read: the message names the file and what is wrong with it."""


def load_results(run_dir: RunDir) -> dict:
    """The table of the run in `run_dir`: results.json, else what results.jsonl kept of an unfinished run."""
    whole, lines, directory = run_dir.results, run_dir.results_lines, run_dir.path
    for path in (whole, lines):
        if path.exists() and not path.is_file():  # a FIFO would block the read for ever
            raise ResultsProblem(f"{path} is not a regular file (a FIFO, a device or a folder): remove it and rerun `packcheck run`")
    unfinished = run_dir.unfinished_run()
    if unfinished is not None and whole.exists():
        raise ResultsProblem(f"{whole} is not the results of the run that started in {directory}{unfinished}, which never finished: "
                             "rerun `packcheck run`")
    if whole.exists():
        data = _read_json(whole)
    elif lines.exists():
        data = _from_lines(lines)
    elif unfinished is not None:
        raise ResultsProblem(f"{directory}: the run that started here{unfinished} ended before it recorded a verdict (killed during "
                             "start-up?): nothing to report; run it again")
    else:
        raise ResultsProblem(f"{directory} holds neither results.json nor results.jsonl: point at the --out directory of a `packcheck run`")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsProblem(f"{whole if whole.exists() else lines} has schema {schema!r:.80}; this packcheck reads {SCHEMA!r}")
    source = whole if whole.exists() else lines
    for key, kind in (("verdicts", list), ("rows", list), ("provenance", dict), ("properties", list), ("damage", list),
                      ("resources", dict)):
        if not isinstance(data.get(key, kind()), kind):
            raise ResultsProblem(f"{source}: {key!r} is {type(data[key]).__name__}, expected a {kind.__name__}: {EDITED}")
    if not isinstance(data.get("provenance", {}).get("tolerances", {}), dict):
        raise ResultsProblem(f"{source}: provenance.tolerances is {type(data['provenance']['tolerances']).__name__}, expected an "
                             f"object: {EDITED}")
    _check_records(source, "verdicts", data.get("verdicts", []), VERDICT_FIELDS, OPTIONAL_VERDICT_FIELDS)
    _check_records(source, "rows", data.get("rows", []), ROW_FIELDS, OPTIONAL_ROW_FIELDS)
    _check_sealed(run_dir)  # last: a file damaged otherwise is named by what is wrong with it
    return data


EDITED = "the file was edited or written by something else; rerun `packcheck run` to get it back"
NUMBER = (int, float, str)  # a number, or one of the strings _finite writes for inf and NaN (checked by _is_number)
NON_FINITE = ("inf", "-inf", "nan")

# what a reader relies on in each record, with its type; the optional ones are checked where present
VERDICT_FIELDS = {"engine": str, "family": str, "scenario": str, "dtype": str, "device": str, "status": str}
OPTIONAL_VERDICT_FIELDS = {"attention": str, "seconds": NUMBER, "max_margin": NUMBER}
ROW_FIELDS = {"engine": str, "family": str, "scenario": str, "quantity": str, "metric": str, "observed": NUMBER, "threshold": NUMBER}
OPTIONAL_ROW_FIELDS = {"attention": str, "margin": NUMBER}


def _is(value, kind) -> bool:
    if kind is NUMBER:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)) or value in NON_FINITE
    return isinstance(value, kind)


def _check_records(source: Path, key: str, records: list, fields: dict, optional: dict) -> None:
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise ResultsProblem(f"{source}: {key}[{index}] is {type(record).__name__}, expected an object")
        for field, kind in fields.items():
            if not _is(record.get(field), kind):
                got = "missing" if field not in record else f"a {type(record[field]).__name__}"
                raise ResultsProblem(f"{source}: {key}[{index}].{field} is {got}: {EDITED}")
        for field, kind in optional.items():
            if record.get(field) is not None and not _is(record[field], kind):
                expected = "a number" if kind is NUMBER else f"a {kind.__name__}"
                raise ResultsProblem(f"{source}: {key}[{index}].{field} is {record[field]!r:.40} ({type(record[field]).__name__}), "
                                     f"expected {expected}: {EDITED}")


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _check_sealed(run_dir: RunDir) -> None:
    """The results as their run wrote them at its end (RunDir.seal): a process the run left behind (an engine's server
    started through another service, one whose warden was killed: docs/isolation.md) that rewrote results.json after the
    run is refused, not reported. By content, so a copied run directory (a CI artifact) still reads."""
    if not run_dir.seal.is_file():
        return
    try:
        sealed = json.loads(run_dir.seal.read_text())
    except (OSError, ValueError, RecursionError):
        sealed = None
    if not isinstance(sealed, dict):
        raise ResultsProblem(f"{run_dir.seal} is damaged: the results cannot be told from ones written after the run; rerun `packcheck run`")
    for path in (run_dir.results, run_dir.results_lines):
        if sealed.get(path.name) != _sha256(path):
            raise ResultsProblem(f"{path} was changed after its run ended (its sha256 is not the one the run recorded in "
                                 f"{run_dir.seal.name}): not reported; rerun `packcheck run`")


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ResultsProblem(f"{path} is not valid JSON ({err}): a truncated or edited file? results.jsonl beside it keeps every verdict")
    except RecursionError:
        raise ResultsProblem(f"{path} nests its JSON deeper than Python can read (no packcheck run writes that): the file was "
                             "edited or written by something else; rerun `packcheck run`") from None


def _from_lines(path: Path) -> dict:
    """Header and every complete verdict line; a last line cut short by a kill is left out."""
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not text:
        raise ResultsProblem(f"{path} is empty: the run wrote nothing")
    try:
        header = json.loads(text[0])
    except RecursionError:
        raise ResultsProblem(f"{path}: its first line nests JSON deeper than Python can read: {EDITED}") from None
    except json.JSONDecodeError as err:
        raise ResultsProblem(f"{path}: its first line is not JSON ({err})") from None
    verdicts, rows, cut = [], [], 0
    for line in text[1:]:
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            cut += 1
            continue
        if isinstance(entry, dict) and isinstance(entry.get("verdict"), dict) and isinstance(entry.get("rows"), list):
            verdicts.append(entry["verdict"])
            rows += entry["rows"]
        else:
            cut += 1
    if not verdicts:
        raise ResultsProblem(f"{path} holds no complete verdict ({cut} line(s) cut short or damaged) and there is no results.json: "
                             "the run stopped before its first verdict was recorded; nothing to report: run it again")
    unfinished = (f"this run did not finish (no results.json): {len(verdicts)} verdict(s) recovered from results.jsonl"
                  + (f", {cut} line(s) cut short or damaged left out" if cut else "") + "; the verdicts it did not reach are missing")
    if not isinstance(header, dict):
        raise ResultsProblem(f"{path}: its first line is a JSON {type(header).__name__}, not the header object: {EDITED}")
    return {"schema": header.get("schema"), "provenance": header.get("provenance", {}), "verdicts": verdicts, "rows": rows,
            "unfinished": unfinished}
