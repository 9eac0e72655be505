"""A shrunk case as one standalone JSON file (schema `packcheck.shrunk/1`, no pickle), and reading it back.

It holds everything a replay needs and nothing of the machine that wrote it but one folder: the scenario, the engine
(name and spec, and `engine_dir`, the folder a `module:Class` spec imported from or a file spec's folder, where a
replay of that engine runs: harness/shrink/replay.py), family, dtype, device, attention, the run's inputs with the
`smaller` the search found (harness/data/smaller.py), the noise floors a run of its own judged by, and every arm of the
scenario's first stage as a Case (samples, layout, partition, parallel plan, loss; a model written from a seed as its
config and seed, its checkpoint `null`, rebuilt from them on reading; a checkpoint of the user's by its path), and
where only the compared arms (and those their judge compares them with) ran, their names (`only`:
harness/shrink/plans.py); then for people: the failing comparison, the diagnosis's class, the diagnosis at the
scenario's size and at the shrunk one, the sizes before and after, the search's seconds and trials, and the command
that replays it. A run keeps its shrunk cases under RUN_DIR/shrunk/<engine>/<family>/<scenario>.json
(harness/run_dir/layout.py), where the report finds them (harness/run_dir/shrunk.py, which also checks a file's
schema and reads its summary).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from packcheck.harness.contract import Case, ContractError
from packcheck.harness.data.smaller import Smaller
from packcheck.harness.files import write_atomically
from packcheck.harness.models import checkpoint_for
from packcheck.harness.models.config_check import config_problem
from packcheck.harness.models.sizes import is_path
from packcheck.harness.models.smaller import seeded
from packcheck.harness.run.inputs import Inputs
from packcheck.harness.run.reproduce import engine_folder, replay_command
from packcheck.harness.run_dir.shrunk import SCHEMA, ShrunkProblem, Summary, read_json, summary_of
from packcheck.harness.shrink.driver import Shrunk


def write_shrunk(shrunk: Shrunk, path: str | Path) -> Path:
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    subject = shrunk.subject
    inputs = subject.inputs_with(shrunk.smaller)
    folder = engine_folder(subject.engine)
    data = {
        "schema": SCHEMA, "scenario": subject.scenario.name, "engine": subject.engine_name, "engine_spec": subject.engine,
        **({"engine_dir": str(folder.resolve())} if folder is not None else {}),
        "family": subject.family, "dtype": subject.dtype, "device": subject.device, "attention": subject.attention,
        "inputs": inputs.to_json() | ({"model": os.path.abspath(inputs.model)} if is_path(inputs.model) else {}),
        **({"noise_floors": {d: dict(f) for d, f in subject.noise_floors.items()}} if subject.noise_floors else {}),
        "comparison": str(shrunk.target), "diagnosis_class": shrunk.target.diagnosis_class,
        "diagnosis": {"before": shrunk.first_diagnosis, "after": str(shrunk.verdict.diagnosis)},
        "before": shrunk.before.to_json(), "after": shrunk.after.to_json(),
        "search": {"seconds": round(shrunk.seconds, 2), "trials": shrunk.trials, "complete": shrunk.complete,
                   "only_the_comparisons_arms": shrunk.narrowed, "control": shrunk.control},
        "replay": replay_command(path, folder and folder.resolve()),
        "arms": {name: portable(case) for name, case in shrunk.arms.items()},
        **({"only": sorted(shrunk.only)} if shrunk.only is not None else {}),
    }
    write_atomically(path, json.dumps(data, indent=1))
    return path


def portable(case: Case) -> dict:
    """The case as JSON, a model written from a seed without its checkpoint's path (rebuilt from config and seed)."""
    data = case.to_json()
    if seeded(case.model):
        data["model"] = data["model"] | {"checkpoint": None}
    return data


@dataclass(frozen=True, kw_only=True, slots=True)
class ShrunkCase:
    """A shrunk case read back: what `packcheck replay` runs."""

    path: Path
    scenario: str
    engine: str  # its name
    engine_spec: str
    engine_dir: Path | None  # the folder its engine imported from (or its file's), where that engine is replayed; None: anywhere
    family: str
    dtype: str
    device: str
    attention: str
    inputs: Inputs  # with the `smaller` found
    noise_floors: Mapping[str, Mapping[str, float]]
    arms: Mapping[str, Case]  # the first stage's
    only: frozenset[str] | None  # the arms the scenario's last engine stage was narrowed to (harness/shrink/plans.py), or None
    summary: Summary


def read_shrunk(path: str | Path) -> ShrunkCase:
    """The case in `path`, its seeded checkpoints written again from their config and seed."""
    path = Path(path).resolve()
    data = read_json(path)
    summary = summary_of(path, data)
    try:
        raw = data["inputs"]
        inputs = Inputs(model=str(raw["model"]), seed=int(raw["seed"]), data_scale=raw.get("data_scale"),
                        smaller=Smaller.from_json(raw["smaller"]) if "smaller" in raw else None)
        if not isinstance(data["arms"], dict) or not data["arms"]:
            raise ShrunkProblem(f"{path}: arms is {data['arms']!r:.40}: a shrunk case holds the arms of its scenario's first stage; "
                                "rewrite it with `packcheck shrink`")
        arms = {name: Case.from_json(with_checkpoint(case, path, name)) for name, case in data["arms"].items()}
        return ShrunkCase(path=path, scenario=str(data["scenario"]), engine=str(data["engine"]), engine_spec=str(data["engine_spec"]),
                          engine_dir=Path(data["engine_dir"]) if data.get("engine_dir") is not None else None,
                          family=str(data["family"]), dtype=str(data["dtype"]), device=str(data["device"]), attention=str(data["attention"]),
                          inputs=inputs, noise_floors=data.get("noise_floors", {}), arms=arms,
                          only=frozenset(map(str, data["only"])) if "only" in data else None, summary=summary)
    except (KeyError, TypeError, ValueError, ContractError) as err:
        raise ShrunkProblem(f"{path}: {err} (a missing or malformed field); rewrite it with `packcheck shrink`") from None


def with_checkpoint(case: dict, path: Path, name: str) -> dict:
    """An arm's JSON whose model has a checkpoint: written from its config and seed where it was `null`; a path of the
    user's must exist."""
    model = case["model"]
    if (problem := config_problem(model["config"])) is not None:
        raise ShrunkProblem(f"{path}: arms.{name}.model.config.{problem}; rewrite it with `packcheck shrink`")
    if model.get("checkpoint") is None:
        return case | {"model": model | {"checkpoint": checkpoint_for(model["family"], model["config"], model["seed"])}}
    if not Path(model["checkpoint"]).is_dir():
        raise ShrunkProblem(f"{path}: arms.{name}.model.checkpoint {model['checkpoint']} is not a directory here; "
                            "copy the model's checkpoint there, or edit the field to where it is")
    return case
