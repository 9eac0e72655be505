"""A run in the engine's repository leaves `git status` clean (issue 45, item 4): a failing golden's obtained result goes
under the run's --out, never into the working directory, and an --out packcheck creates is git-ignored, through both
front doors (`packcheck run` and the pytest plugin). Without a run directory the obtained result goes beside the goldens
only where they are the user's own or packcheck's checkout is the working directory."""

from __future__ import annotations

import subprocess

import pytest

from packcheck.harness.cli.main import main
from packcheck.harness.golden import golden_dir, obtained_beside_golden
from packcheck.harness.run_dir import RunDir
from tests.forked import python


def git_status(repository) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repository, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def engine_repository(tmp_path, monkeypatch):
    """An engine's git repository, the working directory, with packcheck's own goldens in use."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    monkeypatch.delenv("PACKCHECK_GOLDEN_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_failing_golden_writes_its_obtained_result_under_out(engine_repository, capsys):
    code = main(["run", "--engine", "mutant.ga-mean-of-means", "--family", "llama", "--scenario", "golden_regression",
                 "--out", "reports/ci", "--no-report"])
    assert code == 1, capsys.readouterr().err
    obtained = [p.parent for p in (engine_repository / "reports" / "ci" / "obtained").glob("*/llama/result.safetensors")]
    assert len(obtained) == 1 and (obtained[0] / "provenance.json").is_file()
    assert f"the obtained result is written to {obtained[0]}" in capsys.readouterr().err
    assert sorted(p.name for p in engine_repository.iterdir()) == [".git", "reports"], "nothing beside --out"
    assert git_status(engine_repository) == "", "the --out packcheck created is git-ignored"


def test_an_out_packcheck_creates_is_ignored_and_one_that_was_there_is_left_alone(tmp_path):
    made = RunDir(tmp_path / "reports" / "ci")
    made.create()
    assert made.gitignore.read_text().splitlines()[-1] == "*"
    (tmp_path / "mine").mkdir()
    given = RunDir(tmp_path / "mine")
    given.create()
    assert not given.gitignore.exists(), "a directory the user made is theirs: packcheck adds no .gitignore to it"
    default = RunDir(tmp_path / "default")
    default.path.mkdir()
    default.create(default=True)
    assert default.gitignore.exists(), "the default --out is packcheck's choice, there or not"


def test_the_plugins_out_is_ignored_too(engine_repository):
    done = subprocess.run(python("-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "packcheck.conformance", "--engine",
                           "reference", "--family", "llama", "--scenario", "token_conservation", "--out", "reports/ci", "--collect-only",
                           "-q"), cwd=engine_repository, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert RunDir(engine_repository / "reports" / "ci").gitignore.is_file()
    assert git_status(engine_repository) == "", git_status(engine_repository)


def test_without_a_run_directory_the_obtained_result_goes_beside_the_goldens_or_nowhere(tmp_path, monkeypatch):
    monkeypatch.delenv("PACKCHECK_GOLDEN_DIR", raising=False)
    checkout = golden_dir().resolve().parents[1]
    monkeypatch.chdir(tmp_path)
    assert obtained_beside_golden("llama") is None, "a user's project: not into its working directory"
    monkeypatch.chdir(checkout / "docs")
    assert obtained_beside_golden("llama") == checkout / "fixtures" / "goldens" / "llama.obtained", "developing packcheck"
    monkeypatch.setenv("PACKCHECK_GOLDEN_DIR", str(tmp_path / "goldens"))
    monkeypatch.chdir(tmp_path)
    assert obtained_beside_golden("llama") == tmp_path / "goldens" / "llama.obtained", "the user's own goldens: beside them"
