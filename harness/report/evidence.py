"""What a failing verdict's saved arms add to its report section: the arms and their cases, token
strips of the per-token comparisons, per-rank collective traces where the ranks diverge, and the
engine's notes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from packcheck.harness.report.collectives import collective_table, well_formed
from packcheck.harness.report.token_errors import token_errors
from packcheck.harness.report.token_strip import token_strip
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.saved_arms import SavedArms


def arm_evidence(run_dir: Path, v, rows: pd.DataFrame) -> dict | None:
    """Template data for one verdict, or None when the run kept none of its arms."""
    saved = SavedArms(RunDir(run_dir).arms(v.engine, v.family, v.scenario))
    arms, collectives, notes = [], [], []
    for name in saved.names:
        loaded = saved.get(name)
        if loaded is None:
            continue
        case, result = loaded
        broken = saved.invalid(name)
        arms.append({"name": name, "case": case.describe() + (f" (invalid result: {broken[0]})" if broken else "")})
        if result.collectives and not well_formed(result.collectives):
            saved.problems.append(f"arm {name!r}: collectives is not a list per rank of collective-recorder entries; not drawn")
        elif result.collectives and (table := collective_table(result.collectives)) is not None:
            collectives.append({"arm": name} | table)
        if result.notes:
            notes.append({"arm": name, "text": json.dumps(result.notes, indent=1, sort_keys=True, default=str)})
    if not arms and not saved.problems:
        return None
    return {
        "directory": str(saved.directory), "arms": arms, "strips": [token_strip(e) for e in token_errors(saved, rows)],
        "collectives": collectives, "notes": notes, "problems": saved.problems,
    }
