"""A run's localisations: `localisations.jsonl` in the run directory, one line per located verdict, written by
`packcheck run --localise` as each failing verdict is located and appended by `packcheck localise` afterwards.

Each line is {"verdict": the verdict's VERDICT_KEYS values, "divergence": Divergence.to_json()}; the report, the
Markdown summary, the JUnit file and the console read them through `read_localisations`, keyed like verdicts (the
last line of a key wins: a later localisation of the same verdict replaces an earlier one).
"""

from __future__ import annotations

import json

from packcheck.harness.compare.divergence import Divergence
from packcheck.harness.run_dir.layout import RunDir
from packcheck.harness.run_dir.results import VERDICT_KEYS, Judged


def verdict_key(verdict: Judged | dict) -> tuple:
    """The verdict's key: its VERDICT_KEYS values, as results.jsonl records them."""
    get = verdict.get if isinstance(verdict, dict) else lambda k, d="": getattr(verdict, k, d)
    return tuple(str(get(k, "")) for k in VERDICT_KEYS)


def add_localisation(run_dir: RunDir, verdict: Judged | dict, divergence: Divergence) -> None:
    record = {"verdict": dict(zip(VERDICT_KEYS, verdict_key(verdict))), "divergence": divergence.to_json()}
    with open(run_dir.localisations, "a", encoding="utf-8") as lines:
        lines.write(json.dumps(record, allow_nan=True) + "\n")


def read_localisations(run_dir: RunDir) -> dict[tuple, Divergence]:
    """Verdict key -> its latest localisation; {} for a run without any (a line that does not parse is skipped)."""
    path = run_dir.localisations
    found: dict[tuple, Divergence] = {}
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            found[verdict_key(record["verdict"])] = Divergence.from_json(record["divergence"])
        except (ValueError, KeyError, TypeError):
            continue
    return found
