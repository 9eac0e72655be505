"""A refactor of how the harness judges leaves every result as it was: the default matrix of the reference,
run by this checkout and by a commit before the refactor, gives the same flat comparison table (every row:
arms, quantity, item, metric, observed, threshold, margin, passed, where) and the same verdicts (status,
diagnosis, detail, worst comparison, margins; only the wall time and the reproduce command's path to packcheck differ),
in float64, float32 and bfloat16 on the CPU.

The before-run is the commit PACKCHECK_IDENTITY_BASE (default: the last commit before the judging-as-data
refactor, issue 30) checked out in a scratch worktree and run with the same interpreter, or, to skip that
half, PACKCHECK_IDENTITY_BEFORE=DIR with DIR/<dtype> holding its runs. Slow (a default matrix per dtype
and side): `nox -s slow -- tests/test_results_identical.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from packcheck.harness.bisect.worktree import scratch_worktree

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REFACTOR = "9432da50b33a0a96ca9b9c6a4db0d3cfb60cf3f8"  # main before harness/judging and the typed plans (issue 30)
FOLDERS = ("harness", "impls", "conformance", "fixtures")


def records(run: Path, table: str) -> list[dict]:
    return [json.loads(line) for line in (run / f"{table}.jsonl").read_text().splitlines()]


def program_free(command: str) -> str:
    """A reproduce command without the path of its `packcheck` (named by its full path since issue 29)."""
    return re.sub(r"^(cd \S+ && )?\S*packcheck run ", r"\1packcheck run ", command)


def differences(before: Path, after: Path) -> list[str]:
    """Every row of the two runs' comparison tables and verdict tables (but the wall time) that is not identical."""
    found = []
    rows_before, rows_after = records(before, "comparisons"), records(after, "comparisons")
    if len(rows_before) != len(rows_after):
        found.append(f"{len(rows_before)} comparison rows before, {len(rows_after)} after")
    found += [f"row {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(rows_before, rows_after)) if a != b]
    timeless = [[{k: program_free(v) if k == "reproduce" else v for k, v in r.items() if k != "seconds"} for r in records(run, "verdicts")]
                for run in (before, after)]
    if len(timeless[0]) != len(timeless[1]):
        found.append(f"{len(timeless[0])} verdicts before, {len(timeless[1])} after")
    found += [f"verdict {a['family']} {a['scenario']}: " + ", ".join(f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in a if a.get(k) != b.get(k))
              for a, b in zip(*timeless) if a != b]
    return found


def write_run(directory: Path, rows: list[dict], verdicts: list[dict]) -> Path:
    directory.mkdir(parents=True)
    for table, records_ in (("comparisons", rows), ("verdicts", verdicts)):
        (directory / f"{table}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records_))
    return directory


def test_a_changed_row_or_verdict_is_a_difference_and_the_wall_time_is_not(tmp_path):
    row = {"arm": "packed", "against": "unpacked", "quantity": "grad", "observed": 1e-13, "threshold": 1e-10}
    verdict = {"family": "llama", "scenario": "packed_vs_unpacked", "status": "pass", "seconds": 1.0}
    before = write_run(tmp_path / "before", [row], [verdict])
    assert differences(before, write_run(tmp_path / "same", [row], [verdict | {"seconds": 2.0}])) == []
    named = {"reproduce": "packcheck run --engine reference --family llama"}
    assert differences(write_run(tmp_path / "bare", [row], [verdict | named]),
                       write_run(tmp_path / "full", [row], [verdict | {"reproduce": "/venv/bin/packcheck run --engine reference --family llama"}])) == []
    moved = write_run(tmp_path / "moved", [row | {"observed": 2e-13}], [verdict | {"status": "fail"}])
    assert differences(before, moved) == [f"row 0: {row} -> {row | {'observed': 2e-13}}",
                                          "verdict llama packed_vs_unpacked: status 'pass' -> 'fail'"]
    assert differences(before, write_run(tmp_path / "fewer", [], [verdict])) == ["1 comparison rows before, 0 after"]


def run_default_matrix(tree: Path, dtype: str, out: Path) -> Path:
    """`packcheck run --engine reference` (every family and scenario) of the checkout at `tree`, imported from there."""
    shim = out.parent / f"{out.name}-imports" / "packcheck"
    shim.mkdir(parents=True)
    for folder in FOLDERS:
        (shim / folder).symlink_to(tree / folder)
    env = os.environ | {"PYTHONPATH": str(shim.parent)}  # ahead of the installed packcheck
    done = subprocess.run([sys.executable, "-m", "packcheck.harness.cli.main", "run", "--engine", "reference", "--dtype", dtype,
                           "--save-arms", "none", "--out", str(out)], env=env, cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, f"the default matrix at {tree} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return out


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16"])
def test_the_default_matrix_is_identical_to_the_commit_before_the_refactor(tmp_path, dtype):
    after = run_default_matrix(ROOT, dtype, tmp_path / "after")
    if "PACKCHECK_IDENTITY_BEFORE" in os.environ:
        before = Path(os.environ["PACKCHECK_IDENTITY_BEFORE"]) / dtype
    else:
        with scratch_worktree(ROOT, os.environ.get("PACKCHECK_IDENTITY_BASE", BEFORE_REFACTOR)) as tree:
            before = run_default_matrix(tree, dtype, tmp_path / "before")
    found = differences(before, after)
    assert not found, f"{len(found)} differences from {before}:\n" + "\n".join(found[:20])
