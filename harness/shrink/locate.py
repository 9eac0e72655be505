"""The verdict `packcheck shrink` is pointed at: RUN_DIR (its one failing verdict), RUN_DIR/ENGINE/FAMILY/SCENARIO
(optionally /DTYPE/DEVICE/ATTENTION where the run has several), or the verdict's saved arms,
RUN_DIR/cases/ENGINE/FAMILY/SCENARIO; and the Subject it is, with the run's inputs and noise floors
(results.json's provenance)."""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.errors import InputError
from packcheck.harness.judging.status import Status
from packcheck.harness.run.calibration import floors_from_report
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run_dir import RunDir
from packcheck.harness.run_dir.results import VERDICT_KEYS, load_results
from packcheck.harness.scenarios import get_scenario
from packcheck.harness.shrink.subject import Subject
from packcheck.harness.text import path_name


class NoSuchVerdict(InputError):
    """The path names no verdict of a run: the message lists those it could name."""


def run_directory(path: str | Path) -> tuple[Path, tuple[str, ...]]:
    """The run directory `path` is in or under (holding results.json or results.jsonl), and the parts after it."""
    found = RunDir.find(path)
    if found is None:
        raise NoSuchVerdict(f"{Path(path).resolve()}: neither it nor a folder above it holds results.json: give "
                            "RUN_DIR/ENGINE/FAMILY/SCENARIO, RUN_DIR the --out of a `packcheck run`")
    run_dir, parts = found
    return run_dir.path, parts


def verdict_path(run_dir: Path, verdict: dict) -> str:
    return "/".join([str(run_dir), path_name(verdict["engine"]), verdict["family"], verdict["scenario"]])


def find_verdict(path: str | Path) -> tuple[Path, dict, dict]:
    """(run directory, the verdict's record, the run's provenance) for `path`."""
    run_dir, parts = run_directory(path)
    data = load_results(RunDir(run_dir))
    verdicts = data.get("verdicts", [])
    if not parts:
        failing = [v for v in verdicts if v["status"] == Status.FAIL]
        if len(failing) == 1:
            return run_dir, failing[0], data.get("provenance", {})
        listed = "\n  ".join(verdict_path(run_dir, v) for v in (failing or verdicts))
        what = f"{len(failing)} failing verdicts" if failing else "no failing verdict"
        raise NoSuchVerdict(f"{run_dir} has {what}; name one as RUN_DIR/ENGINE/FAMILY/SCENARIO:\n  {listed}")
    keys = ("engine", *VERDICT_KEYS[1:])
    matching = [v for v in verdicts if all(part in (v.get(key, ""), path_name(str(v.get(key, "")))) for key, part in zip(keys, parts))]
    if len(matching) == 1 and len(parts) <= len(keys):
        return run_dir, matching[0], data.get("provenance", {})
    if not matching or len(parts) > len(keys):
        listed = "\n  ".join(verdict_path(run_dir, v) for v in verdicts)
        raise NoSuchVerdict(f"{'/'.join(parts)}: no verdict of {run_dir} is so named; its verdicts:\n  {listed}")
    listed = "\n  ".join(f"{verdict_path(run_dir, v)}/{v['dtype']}/{v['device']}/{v.get('attention', 'auto')}" for v in matching)
    raise NoSuchVerdict(f"{'/'.join(parts)} names {len(matching)} verdicts of {run_dir}; add /DTYPE/DEVICE/ATTENTION:\n  {listed}")


def subject_of(verdict: dict, provenance: dict) -> Subject:
    """The verdict's cell with the run's --model/--seed/--data-scale and its own noise floors (where it had them)."""
    raw = provenance.get("inputs") or {}
    inputs = Inputs(model=str(raw.get("model", "tiny")), seed=int(raw.get("seed", 0)), data_scale=raw.get("data_scale"))
    floors = provenance.get("noise_floors")
    return Subject(engine=verdict.get("engine_spec") or verdict["engine"], engine_name=verdict["engine"], scenario=get_scenario(verdict["scenario"]),
                   family=verdict["family"], dtype=verdict["dtype"], device=verdict["device"], attention=verdict.get("attention") or "auto",
                   inputs=inputs, noise_floors=floors_from_report(floors) if floors else {})
