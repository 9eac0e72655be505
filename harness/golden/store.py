"""Golden fixtures: the reference trainer's float64 results, stored with provenance.

Lifecycle (after pytest-regressions): a missing golden fails and says how to write one; a
mismatch writes the obtained result beside the golden (`<family>.obtained/`, git-ignored; from
outside packcheck's checkout, `./packcheck-obtained/<family>.obtained/`) so the two can be diffed; goldens change only through `packcheck golden regen`, and a golden whose case
no longer matches the code that builds it is *stale* and fails with the same hint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
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


RESULT_FILES = ("result.json", "result.safetensors")


def file_digests(path: Path) -> dict[str, str]:
    return {name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in RESULT_FILES if (path / name).exists()}


def load_golden(family: str, case: Case) -> StepResult:
    """The stored golden of `family` for `case`, after checking it is the one regen wrote: the same
    case, and files whose digests match the ones recorded then (a truncated, edited or corrupted
    golden is reported as such, naming the file, never blamed on the engine)."""
    path = golden_path(family)
    hint = REGEN_HINT.format(family=family)
    if not (path / "provenance.json").exists():
        raise GoldenProblem(f"no golden for family {family!r} at {path}. {hint}")
    try:
        stored = json.loads((path / "provenance.json").read_text())
    except (OSError, ValueError) as err:
        raise GoldenProblem(f"{path / 'provenance.json'} cannot be read ({err}): the golden is damaged. {hint}") from None
    if stored.get("case_digest") != float64_digest(case):
        raise GoldenProblem(
            f"the golden for {family!r} was made for case {stored.get('case_digest')} but the scenario now builds "
            f"{float64_digest(case)} (the case, model config or seed changed): the golden is stale. {hint}"
        )
    recorded, found = stored.get("file_digests", {}), file_digests(path)
    for name in RESULT_FILES:
        if name not in recorded:
            raise GoldenProblem(f"{path / 'provenance.json'} records no digest of {name} (written before goldens carried digests): "
                                f"the golden cannot be checked. {hint}")
        if recorded[name] != found.get(name):
            what = "is missing" if name not in found else "has changed since regen wrote it (truncated, edited or corrupted)"
            raise GoldenProblem(f"the golden file {path / name} {what}: sha256 {found.get(name, '-')[:16]}, recorded "
                                f"{recorded[name][:16]}. Restore it from version control, or {hint}")
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
    """Write the golden (or an .obtained result) into a scratch directory beside it, then swap it in:
    a reader sees the old golden or the new one, never half of one."""
    path = path or golden_path(family)
    scratch = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
    result.save(scratch)
    (scratch / "case.json").write_text(json.dumps(case.to_json() | {"model": {**case.model.to_json(), "checkpoint": None}}, indent=1))
    (scratch / "provenance.json").write_text(json.dumps({**provenance, "case_digest": float64_digest(case), "family": family,
                                                         "file_digests": file_digests(scratch)}, indent=1))
    if path.exists():
        retired = path.with_name(f".{path.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(path, retired)
        os.replace(scratch, path)
        shutil.rmtree(retired)
    else:
        os.replace(scratch, path)
    return path


OBTAINED_DIR = "packcheck-obtained"


def obtained_path(family: str) -> Path:
    """Where a failing run's result goes for a diff with the golden, as an absolute path: beside the
    golden (git-ignored) when the goldens are the user's own (PACKCHECK_GOLDEN_DIR) or the user works
    in packcheck's checkout; else in the working directory, ./packcheck-obtained/<family>.obtained:
    never into an installed package, or a checkout of packcheck the user is not working in."""
    beside = golden_path(family).with_name(f"{family}.obtained").absolute()
    cwd = Path.cwd().resolve()
    checkout = golden_dir().resolve().parents[1]  # <checkout>/fixtures/goldens
    if os.environ.get("PACKCHECK_GOLDEN_DIR") or cwd == checkout or checkout in cwd.parents:
        return beside
    return cwd / OBTAINED_DIR / f"{family}.obtained"


def write_obtained(family: str, case: Case, result: StepResult, provenance: dict) -> Path:
    path = obtained_path(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_golden(family, case, result, provenance, path=path)
