"""A shrunk case's file as the run directory holds it (schema `packcheck.shrunk/1`, RUN_DIR/shrunk/<engine>/<family>/<scenario>.json):
reading one with its schema checked, and the summary the reports give of each (`summaries`). harness/shrink/record.py
writes the file and reads its arms back for a replay."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from packcheck.harness.data.size import Size, before_after
from packcheck.harness.errors import InputError
from packcheck.harness.run_dir.layout import RunDir
from packcheck.harness.run_dir.results import VERDICT_KEYS

SCHEMA = "packcheck.shrunk/1"


class ShrunkProblem(InputError):
    """A shrunk case's file that cannot be read: the message names the file, the field and the fix."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """What the report says of a shrunk case: the verdict it shrank, the sizes, the comparison, the replay command."""

    path: Path
    key: tuple[str, ...]  # the verdict's cell: its VERDICT_KEYS values (engine, family, scenario, dtype, device, attention)
    comparison: str
    diagnosis_class: str
    before: Size
    after: Size
    seconds: float
    trials: int
    complete: bool
    replay: str

    def line(self) -> str:
        """`shrunk logprobs (packed vs unpacked): tokens 112 -> 3 (37.3x fewer), documents 10 -> 2, ...` (harness/data/size.py)."""
        cut = "" if self.complete else " (the budget ran out: the smallest found)"
        return f"shrunk {self.comparison}: {before_after(self.before, self.after)}{cut}"


def read_json(path: str | Path) -> dict:
    path = Path(path)
    if path.exists() and not path.is_file():  # a FIFO would block the read for ever
        raise ShrunkProblem(f"{path}: not a regular file (a FIFO, a device or a folder); give a file `packcheck shrink` wrote")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ShrunkProblem(f"{path}: its JSON nests deeper than Python can read; give a file `packcheck shrink` wrote") from None
    except OSError as err:
        raise ShrunkProblem(f"{path}: cannot read it ({err.strerror}); give a file `packcheck shrink` wrote") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ShrunkProblem(f"{path}: not JSON ({err}); give a file `packcheck shrink` wrote") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ShrunkProblem(f"{path}: schema {found!r}, expected {SCHEMA!r}: give a file `packcheck shrink` or `packcheck run --shrink` wrote")
    return data


def summary_of(path: Path, data: dict) -> Summary:
    try:
        return Summary(path=path, key=tuple(str(data[k]) for k in VERDICT_KEYS), comparison=str(data["comparison"]),
                       diagnosis_class=str(data["diagnosis_class"]), before=Size.from_json(data["before"]),
                       after=Size.from_json(data["after"]), seconds=float(data["search"]["seconds"]), trials=int(data["search"]["trials"]),
                       complete=bool(data["search"]["complete"]), replay=str(data["replay"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ShrunkProblem(f"{path}: field {err} is missing or malformed; rewrite it with `packcheck shrink`") from None


def summaries(run_dir: RunDir) -> dict[tuple[str, ...], Summary]:
    """The shrunk cases a run directory holds, by their verdict's cell; a file that cannot be read is left out."""
    found = {}
    for path in sorted(run_dir.shrunk.rglob("*.json")):
        try:
            summary = summary_of(path, read_json(path))
        except ShrunkProblem:
            continue
        found[summary.key] = summary
    return found
