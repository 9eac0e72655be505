"""The arms a run kept for one verdict: DIR/cases/<engine>/<family>/<scenario>/<arm>/.

`packcheck run` saves each arm's Case (case.json) and full StepResult (result.json +
result.safetensors) for failing verdicts (all verdicts with --save-arms all); beside an arm whose result broke the
contract, its problems (invalid.json) and its result where the engine's processes could keep it. Reports read them
here, each at most once; a verdict without saved arms (passing, --save-arms none, a run from
elsewhere) simply has none, and an unreadable arm is named in `problems`, never a crash.
"""

from __future__ import annotations

from pathlib import Path

from packcheck.harness.contract import Case, StepResult
from packcheck.harness.run.invalid_arms import INVALID_FILE


class SavedArms:
    def __init__(self, directory: Path):
        self.directory = directory
        self.problems: list[str] = []
        self._loaded: dict[str, tuple[Case, StepResult] | None] = {}

    @property
    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.name for p in self.directory.iterdir() if (p / "case.json").is_file() and (p / "result.json").is_file())

    def invalid(self, name: str) -> list[str]:
        """What broke the contract in the arm's result (its invalid.json, harness/run/invalid_arms.py); [] for a valid arm."""
        import json

        path = self.directory / name / INVALID_FILE
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
        import json

        path = self.directory / name
        if not (path / "case.json").is_file():
            return None
        try:
            return Case.from_json(json.loads((path / "case.json").read_text())), StepResult.load(path)
        except Exception as err:  # noqa: BLE001 - a damaged or foreign file is reported, the report still renders
            self.problems.append(f"arm {name!r} in {path} could not be read: {type(err).__name__}: {err}")
            return None
