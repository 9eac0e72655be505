"""The arms a run keeps for one verdict: RUN_DIR/cases/<engine>/<family>/<scenario>/<arm>/ (layout.py, ArmDir).

`packcheck run` and the pytest plugin's --out save each arm's Case (case.json) and full StepResult (result.json +
result.safetensors) for failing verdicts (all verdicts with --save-arms all); beside an arm whose result broke the
contract, its problems (invalid.json) and its result where the engine's processes could keep it. Reports read them
here, each at most once; a verdict without saved arms (passing, --save-arms none, a run from
elsewhere) simply has none, and an unreadable arm is named in `problems`, never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.engines import Problem, problems_json
from packcheck.harness.run_dir.layout import ArmDir


def save_arm(directory: Path, arm: str, case: Case, result: StepResult) -> None:
    """An arm's Case (JSON) and StepResult (safetensors + JSON), for reports and re-judging. Arm names are packcheck's
    own (an RL arm's holds '/': a folder per part)."""
    saved = ArmDir(directory / arm)
    result.save(saved.path)
    saved.case.write_text(json.dumps(case.to_json(), indent=1))


def save_invalid_arm(directory: Path, arm: str, case: Case, problems: list[Problem], result: StepResult | None) -> None:
    """An arm whose result broke the contract: its Case, its problems (invalid.json) and its result where it was kept."""
    saved = ArmDir(directory / arm)
    saved.path.mkdir(parents=True, exist_ok=True)
    if result is not None:
        result.save(saved.path)
    saved.case.write_text(json.dumps(case.to_json(), indent=1))
    saved.invalid.write_text(json.dumps(problems_json(problems), indent=1))


class SavedArms:
    def __init__(self, directory: Path):
        self.directory = directory
        self.problems: list[str] = []
        self._loaded: dict[str, tuple[Case, StepResult] | None] = {}

    @property
    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if ArmDir(p).case.is_file() and ArmDir(p).result_meta.is_file())

    def invalid(self, name: str) -> list[str]:
        """What broke the contract in the arm's result (its invalid.json, harness/run/invalid_arms.py); [] for a valid arm."""
        path = ArmDir(self.directory / name).invalid
        try:
            return [str(p) for p in json.loads(path.read_text())["problems"]] if path.is_file() else []
        except Exception as err:  # noqa: BLE001 - a damaged file is reported, the report still renders
            self.problems.append(f"arm {name!r}: {path} could not be read: {type(err).__name__}: {err}")
            return []

    def get(self, name: str) -> tuple[Case, StepResult] | None:
        """The arm's Case and StepResult, or None when it was not saved or cannot be read."""
        if name not in self._loaded:
            self._loaded[name] = self._load(name)
        return self._loaded[name]

    def _load(self, name: str) -> tuple[Case, StepResult] | None:
        saved = ArmDir(self.directory / name)
        if not saved.case.is_file():
            return None
        try:
            return Case.from_json(json.loads(saved.case.read_text())), StepResult.load(saved.path)
        except Exception as err:  # noqa: BLE001 - a damaged or foreign file is reported, the report still renders
            self.problems.append(f"arm {name!r} in {saved.path} could not be read: {type(err).__name__}: {err}")
            return None
