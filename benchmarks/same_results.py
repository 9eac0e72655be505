"""Whether two runs judged alike: their results.jsonl compared row by row, every field but those that
differ from one run to the next of the same code (wall seconds, the run's time stamp, the git commit, the
command line, and where each installation's `packcheck` lies in the reproduce lines).

    python benchmarks/same_results.py BASELINE/results.jsonl CANDIDATE/results.jsonl

Used for refactors that must not change a result (docs/architecture.md): prints the first differing
rows with the path of each differing field, then the count; exit 0 only when every row is the same.
"""

from __future__ import annotations

import json
import re
import sys

VOLATILE = frozenset({"seconds", "time", "git_commit", "command"})
INSTALLATION = re.compile(r"\S*/bin/(?=packcheck )")  # a reproduce line's executable names its venv


def comparable(value):
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, str):
        return INSTALLATION.sub("", value)
    return value


def differences(old, new, path: str = "") -> list[str]:
    if type(old) is not type(new):
        return [f"{path}: {old!r:.200} != {new!r:.200}"]
    if isinstance(old, dict):
        return ([f"{path}.{key}: on one side only" for key in sorted(set(old) ^ set(new))]
                + [d for key in old.keys() & new.keys() for d in differences(old[key], new[key], f"{path}.{key}")])
    if isinstance(old, list):
        if len(old) != len(new):
            return [f"{path}: {len(old)} items != {len(new)}"]
        return [d for index, pair in enumerate(zip(old, new)) for d in differences(*pair, f"{path}[{index}]")]
    return [] if old == new else [f"{path}: {old!r:.200} != {new!r:.200}"]


def main(baseline: str, candidate: str) -> int:
    rows = [[comparable(json.loads(line)) for line in open(path, encoding="utf-8")] for path in (baseline, candidate)]
    differing = [(index, found) for index, pair in enumerate(zip(*rows)) if (found := differences(*pair))]
    for index, found in differing[:5]:
        print(f"row {index}: " + "; ".join(found[:4]))
    print(f"{len(rows[0])} vs {len(rows[1])} rows, {len(differing)} differ (not compared: {', '.join(sorted(VOLATILE))}, installation paths)")
    return 1 if differing or len(rows[0]) != len(rows[1]) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
