"""Where a run keeps its files: the names of everything in a run's --out directory, and nowhere else.

    OUT/
      results.jsonl         a header line, then one {"verdict", "rows"} line per verdict the moment it is judged (results.py)
      results.json          the whole table, written once when the run ends or is interrupted (results.py)
      verdicts.jsonl, verdicts.csv, comparisons.jsonl, comparisons.csv   the same records as flat tables (tables.py)
      report.html           the self-contained report; summary.md the Markdown for a pull request; junit.xml a testcase
                            per verdict (harness/report/run_reports.py writes the three)
      localisations.jsonl   where each located verdict's two arms first part (localisations.py)
      cases/<engine>/<family>/<scenario>/<arm>/     a verdict's saved arms (saved_arms.py):
        case.json           the arm's Case
        result.json, result.safetensors   its StepResult (harness/contract/result.py names them)
        invalid.json        an arm whose result broke the contract: its problems
      shrunk/<engine>/<family>/<scenario>.json      a verdict's shrunk case (harness/shrink/record.py; summaries: shrunk.py)
      obtained/<engine>/<family>/   a failing golden_regression verdict's result, stored as its golden is, for a diff
                            with it (harness/golden/store.py writes it)
      launches/             the engines' processes' working folders (harness/launch/layout.py, LaunchDir)
      .packcheck-run.lock   held by the run writing here (harness/run/out_lock.py)
      .packcheck-run.in-progress   there from the moment a run claims the directory until its results.json is written
                            (RunDir.begin, RunDir.end): a reader that finds it knows the results are not a finished run's
      .packcheck-run.seal   the sha256 of results.json and results.jsonl as the run wrote them at its end (results.py): a
                            reader refuses results changed after the run ended
      .gitignore            in an --out packcheck created: a run directory is not source (RunDir.create)

`packcheck calibrate --out OUT` keeps one run directory per seed, OUT/seed-N/, and its summary, OUT/calibration.json.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from packcheck.harness.text import path_name

TABLES = tuple(f"{name}.{kind}" for name in ("verdicts", "comparisons") for kind in ("jsonl", "csv"))
CASES = "cases"
OBTAINED = "obtained"
GITIGNORE = "# written by packcheck: a run directory, not source\n*\n"


class ArmDir:
    """One saved arm of a verdict: cases/<engine>/<family>/<scenario>/<arm>/ (the arm's name may hold '/': a folder per part)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def case(self) -> Path:
        return self.path / "case.json"

    @property
    def invalid(self) -> Path:
        return self.path / "invalid.json"

    @property
    def result_meta(self) -> Path:
        """The JSON half of the arm's StepResult, which StepResult.save writes into the arm's folder: the arm kept a result."""
        return self.path / "result.json"


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    @classmethod
    def find(cls, path: str | Path) -> tuple[RunDir, tuple[str, ...]] | None:
        """The run directory `path` is in or under (one holding results.json or results.jsonl), and the parts of `path`
        after it, a leading cases/ left out (a verdict's saved arms name it as its ENGINE/FAMILY/SCENARIO does); or None."""
        path = Path(path).resolve()
        for folder in (path, *path.parents):
            if cls(folder).holds_results:
                parts = path.relative_to(folder).parts
                return cls(folder), parts[1:] if parts[:1] == (CASES,) else parts
        return None

    @property
    def holds_results(self) -> bool:
        return self.results.is_file() or self.results_lines.is_file()

    @property
    def results(self) -> Path:
        return self.path / "results.json"

    @property
    def results_lines(self) -> Path:
        return self.path / "results.jsonl"

    def table(self, name: str) -> Path:
        """One of the flat tables, TABLES: verdicts.jsonl, verdicts.csv, comparisons.jsonl, comparisons.csv."""
        assert name in TABLES, name
        return self.path / name

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def summary_md(self) -> Path:
        return self.path / "summary.md"

    @property
    def junit_xml(self) -> Path:
        return self.path / "junit.xml"

    @property
    def localisations(self) -> Path:
        return self.path / "localisations.jsonl"

    @property
    def cases(self) -> Path:
        return self.path / CASES

    def arms(self, engine: str, family: str, scenario: str) -> Path:
        """The folder of one verdict's saved arms, the engine's name made a safe path component (an engine names itself:
        '../x' stays inside the run directory)."""
        return self.cases / path_name(engine) / family / scenario

    @property
    def shrunk(self) -> Path:
        return self.path / "shrunk"

    def shrunk_case(self, engine: str, family: str, scenario: str) -> Path:
        """Where the run keeps a verdict's shrunk case, beside its saved arms."""
        return self.shrunk / path_name(engine) / family / f"{scenario}.json"

    def obtained(self, engine: str, family: str) -> Path:
        """Where a failing golden verdict's result goes, for a diff with the family's golden."""
        return self.path / OBTAINED / path_name(engine) / family

    @property
    def launches(self) -> Path:
        return self.path / "launches"

    @property
    def lock(self) -> Path:
        return self.path / ".packcheck-run.lock"

    @property
    def seal(self) -> Path:
        return self.path / ".packcheck-run.seal"

    @property
    def in_progress(self) -> Path:
        return self.path / ".packcheck-run.in-progress"

    def begin(self) -> None:
        """Mark the directory as holding a run in progress, then forget what an earlier run left (its results.jsonl too):
        whatever ends this run (a kill -9 during start-up included), no reader takes the earlier run's results for its
        own. First the mark, then the forgetting: a kill between the two leaves the mark."""
        self.in_progress.write_text(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}))
        self.forget_earlier_run()
        self.results_lines.unlink(missing_ok=True)
        self.seal.unlink(missing_ok=True)

    def end(self) -> None:
        """The run's whole table is written (results.json): the directory holds a finished run."""
        self.in_progress.unlink(missing_ok=True)

    def unfinished_run(self) -> str | None:
        """' (pid N, started T)' of the run that began here and has not written its results.json, or None."""
        if not self.in_progress.is_file():
            return None
        try:
            said = json.loads(self.in_progress.read_text())
            return f" (pid {int(said['pid'])}, started {str(said['started'])[:19]})"
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return ""

    @property
    def gitignore(self) -> Path:
        return self.path / ".gitignore"

    def create(self, default: bool = False) -> None:
        """Make the directory (and its parents). One packcheck made gets a .gitignore, so that a run in the engine's
        repository (`--out reports/ci`) leaves `git status` clean; so does the `default` --out, packcheck's own choice,
        even if it was there. A directory the user gave that was there is left as it is."""
        made = not self.path.is_dir()
        self.path.mkdir(parents=True, exist_ok=True)
        if (made or default) and not self.gitignore.exists():
            self.gitignore.write_text(GITIGNORE)

    @property
    def write_probe(self) -> Path:
        """A file written and removed at once, to learn before a run starts that it can write here."""
        return self.path / ".packcheck-write-test"

    @property
    def calibration(self) -> Path:
        """`packcheck calibrate`'s summary, beside its seeds' run directories."""
        return self.path / "calibration.json"

    def seed_run(self, seed: int) -> RunDir:
        return RunDir(self.path / f"seed-{seed}")

    def seed_runs(self) -> list[RunDir]:
        """The seed-N run directories of a `packcheck calibrate` out that hold results, in order of their names."""
        return [RunDir(p) for p in sorted(self.path.glob("seed-*")) if RunDir(p).holds_results]

    def forget_earlier_run(self) -> None:
        """What an earlier run left in a reused --out and a reader would take for this run's: its whole table, flat
        tables, reports, localisations and shrunk cases (results.jsonl is written afresh; saved arms and obtained results
        are replaced verdict by verdict: the pytest plugin writes its results here after its workers wrote them)."""
        for stale in (self.results, *map(self.table, TABLES), self.report_html, self.summary_md, self.junit_xml, self.localisations):
            stale.unlink(missing_ok=True)
        shutil.rmtree(self.shrunk, ignore_errors=True)
