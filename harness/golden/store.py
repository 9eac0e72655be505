"""Golden fixtures: the reference trainer's float64 results, stored with provenance.

Lifecycle (after pytest-regressions): a missing golden fails and says how to write one; a
mismatch writes the obtained result beside the golden (`<family>.obtained/`, git-ignored) so the
two can be diffed; goldens change only through `packcheck golden regen`, and a golden whose case
no longer matches the code that builds it is *stale* and fails with the same hint.
"""

from __future__ import annotations

import json
import os
import shutil
from importlib import resources
from pathlib import Path

from packcheck.harness.contract import Case, StepResult

REGEN_HINT = "HINT: regenerate with `packcheck golden regen --family {family}` and review the diff"


class GoldenProblem(Exception):
    """A golden is missing or stale; the message ends with the command that regenerates it."""


def golden_dir() -> Path:
    """PACKCHECK_GOLDEN_DIR, else the goldens shipped as package data (the checkout's fixtures/goldens
    in an editable install)."""
    override = os.environ.get("PACKCHECK_GOLDEN_DIR")
    return Path(override) if override else Path(str(resources.files("packcheck.fixtures") / "goldens"))


def golden_path(family: str) -> Path:
    return golden_dir() / family


def float64_digest(case: Case) -> str:
    """The golden's key: the case as the float64 CPU oracle ran it (any attention backend computes
    the same numbers in exact arithmetic, so the backend is not part of the key)."""
    return case.with_(dtype="float64", device="cpu", attention="auto").digest()


def load_golden(family: str, case: Case) -> StepResult:
    path = golden_path(family)
    hint = REGEN_HINT.format(family=family)
    if not (path / "provenance.json").exists():
        raise GoldenProblem(f"no golden for family {family!r} at {path}. {hint}")
    stored = json.loads((path / "provenance.json").read_text())
    if stored["case_digest"] != float64_digest(case):
        raise GoldenProblem(
            f"the golden for {family!r} was made for case {stored['case_digest']} but the scenario now builds "
            f"{float64_digest(case)} (the case, model config or seed changed): the golden is stale. {hint}"
        )
    return StepResult.load(path)


def load_noise_floor(family: str, dtype: str) -> dict[str, float]:
    """The reference's own error at `dtype` against the golden, as measured by regen."""
    stored = json.loads((golden_path(family) / "provenance.json").read_text())
    floors = stored.get("noise_floor", {})
    if dtype not in floors:
        raise GoldenProblem(
            f"the golden for {family!r} has no noise floor for {dtype} (has: {sorted(floors)}), so no tolerance "
            f"for comparing a {dtype} run with it. {REGEN_HINT.format(family=family)}"
        )
    return floors[dtype]


def write_golden(family: str, case: Case, result: StepResult, provenance: dict, path: Path | None = None) -> Path:
    path = path or golden_path(family)
    if path.exists():
        shutil.rmtree(path)
    result.save(path)
    (path / "case.json").write_text(json.dumps(case.to_json() | {"model": {**case.model.to_json(), "checkpoint": None}}, indent=1))
    (path / "provenance.json").write_text(json.dumps({**provenance, "case_digest": float64_digest(case), "family": family}, indent=1))
    return path


def obtained_path(family: str) -> Path:
    """Where a failing run's result goes beside the golden, for a diff (git-ignored)."""
    return golden_path(family).with_name(f"{family}.obtained")


def write_obtained(family: str, case: Case, result: StepResult, provenance: dict) -> Path:
    return write_golden(family, case, result, provenance, path=obtained_path(family))
