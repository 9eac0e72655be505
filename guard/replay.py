"""`packcheck replay CASE_DIR/case.json` for a guard case (case_file.py): the model, batch and step read back, the
check run again, its verdict printed. Exit 0 when it passes now (the bug fixed), 1 when it still fails."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from packcheck.guard.batch import documents_of
from packcheck.guard.case_file import read_case
from packcheck.guard.check import judged, localised


def replay_guard_case(path: str | Path, device: str | None = None) -> int:
    model, batch, step, case = read_case(path, device)
    documents = documents_of(batch)
    verdict = judged(model, batch, step, documents)
    if not verdict.passed:
        verdict = replace(verdict, where=localised(model, batch, step, documents))
    print(f"packcheck replay: the guard's case {path} ({case['verdict']['diagnosis'] or 'failed'} when written)")
    print(verdict.message())
    return 0 if verdict.passed else 1
