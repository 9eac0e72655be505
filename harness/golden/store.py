"""Golden fixtures: the reference trainer's float64 results, stored with provenance.

Lifecycle (after pytest-regressions): a missing golden fails and says how to write one; a
mismatch writes the obtained result, stored as a golden is, so the two can be diffed: under the run's --out
(`OUT/obtained/<engine>/<family>/`), or, in a run that keeps no run directory, beside the golden
(`<family>.obtained/`, git-ignored) where the goldens are the user's own or packcheck's checkout is the working
directory; goldens change only through `packcheck golden regen`, and a golden whose case
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

import safetensors.torch

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.golden.seal import files as pinned_files
from packcheck.harness.golden.seal import forget

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


def provenance_digest(provenance: dict) -> str:
    """sha256 of every field of a golden's provenance but this digest itself (noise floors and file digests included)."""
    fields = {k: v for k, v in provenance.items() if k != "provenance_digest"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _golden_files(path: Path) -> dict[str, bytes]:
    """The golden folder's files as the run reads them: as pinned before any engine process existed (seal.py), else from disk."""
    pinned = pinned_files(path)
    if pinned is not None:
        return pinned
    names = (*RESULT_FILES, "provenance.json")
    return {name: (path / name).read_bytes() for name in names if (path / name).is_file()}


def _provenance(family: str) -> tuple[Path, dict[str, bytes], dict]:
    """The golden's folder, its files and its provenance, after checking the provenance is the one regen wrote."""
    path = golden_path(family)
    hint = REGEN_HINT.format(family=family)
    found = _golden_files(path)
    if "provenance.json" not in found:
        raise GoldenProblem(f"no golden for family {family!r} at {path}. {hint}")
    try:
        stored = json.loads(found["provenance.json"])
    except ValueError as err:
        raise GoldenProblem(f"{path / 'provenance.json'} cannot be read ({err}): the golden is damaged. {hint}") from None
    if "provenance_digest" not in stored:
        raise GoldenProblem(f"{path / 'provenance.json'} records no digest of itself (written before provenance, noise floors "
                            f"included, carried one): the golden cannot be checked. {hint}")
    if stored["provenance_digest"] != provenance_digest(stored):
        raise GoldenProblem(f"the golden file {path / 'provenance.json'} has changed since regen wrote it (its noise floors, file "
                            f"digests or provenance were edited): sha256 of its fields {provenance_digest(stored)[:16]}, recorded "
                            f"{str(stored['provenance_digest'])[:16]}. Restore it from version control, or {hint}")
    return path, found, stored


def load_golden(family: str, case: Case) -> StepResult:
    """The stored golden of `family` for `case`, after checking it is the one regen wrote: the same
    case, and files whose digests match the ones recorded then (a truncated, edited or corrupted
    golden is reported as such, naming the file, never blamed on the engine). Read as pinned at the
    run's start where a run holds a pin (seal.py): nothing an engine writes during the run is read."""
    path, found, stored = _provenance(family)
    hint = REGEN_HINT.format(family=family)
    if stored.get("case_digest") != float64_digest(case):
        raise GoldenProblem(
            f"the golden for {family!r} was made for case {stored.get('case_digest')} but the scenario now builds "
            f"{float64_digest(case)} (the case, model config or seed changed): the golden is stale. {hint}"
        )
    recorded = stored.get("file_digests", {})
    digests = {name: hashlib.sha256(found[name]).hexdigest() for name in RESULT_FILES if name in found}
    for name in RESULT_FILES:
        if name not in recorded:
            raise GoldenProblem(f"{path / 'provenance.json'} records no digest of {name} (written before goldens carried digests): "
                                f"the golden cannot be checked. {hint}")
        if recorded[name] != digests.get(name):
            what = "is missing" if name not in digests else "has changed since regen wrote it (truncated, edited or corrupted)"
            raise GoldenProblem(f"the golden file {path / name} {what}: sha256 {digests.get(name, '-')[:16]}, recorded "
                                f"{recorded[name][:16]}. Restore it from version control, or {hint}")
    return StepResult.from_parts(json.loads(found["result.json"]), safetensors.torch.load(found["result.safetensors"]), str(path))


def load_noise_floor(family: str, dtype: str) -> dict[str, float]:
    """The reference's own error at `dtype` against the golden, as measured by regen (covered by the provenance's digest)."""
    floors = _provenance(family)[2].get("noise_floor", {})
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
    stored = {**provenance, "case_digest": float64_digest(case), "family": family, "file_digests": file_digests(scratch)}
    (scratch / "provenance.json").write_text(json.dumps({**stored, "provenance_digest": provenance_digest(stored)}, indent=1))
    forget(path)
    if path.exists():
        retired = path.with_name(f".{path.name}.old")
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(path, retired)
        os.replace(scratch, path)
        shutil.rmtree(retired)
    else:
        os.replace(scratch, path)
    return path


def obtained_beside_golden(family: str) -> Path | None:
    """Where a failing verdict's result goes for a diff with the golden when the run keeps no run directory (the pytest
    plugin without --out, a verdict judged from Python): beside the golden (git-ignored) when the goldens are the user's
    own (PACKCHECK_GOLDEN_DIR) or the user works in packcheck's checkout; else None: never into an installed package, a
    checkout of packcheck the user is not working in, or the working directory (the engine's repository). A run with a
    run directory keeps it there (RunDir.obtained)."""
    cwd = Path.cwd().resolve()
    checkout = golden_dir().resolve().parents[1]  # <checkout>/fixtures/goldens
    if os.environ.get("PACKCHECK_GOLDEN_DIR") or cwd == checkout or checkout in cwd.parents:
        return golden_path(family).with_name(f"{family}.obtained").absolute()
    return None


def write_obtained(family: str, case: Case, result: StepResult, provenance: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_golden(family, case, result, provenance, path=path)
