"""The command line follows the conventions a user expects: --version, --help with examples and
exit codes, aligned and unclipped listings, a few close names for an unknown engine (never the
whole registry), and bisect saying when --good and --bad look swapped."""

from __future__ import annotations

import subprocess
from importlib.metadata import version

import pytest

from packcheck.harness.bisect import Probe
from packcheck.harness.bisect.cache import BAD, GOOD, Outcome, VerdictCache
from packcheck.harness.cli.list_cmd import mutant_summary, mutant_table
from packcheck.harness.cli.main import main
from packcheck.harness.engines import engine_names, mutant_names, resolve_engine


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"packcheck {version('packcheck')}"


def test_help_has_examples_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:\n" in out and "packcheck run --engine my_engine:MyEngine" in out
    for line in ("0  every supported case passes", "1  a case fails, errors or hangs", "2  a usage error"):
        assert line in out


def test_list_mutants_aligns_columns_and_wraps_whole_descriptions(capsys):
    assert main(["list", "mutants"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = mutant_names()
    starts = [line for line in lines if line.startswith("mutant.")]
    assert [line.split()[0] for line in starts] == names
    column = max(map(len, names)) + 2
    assert all(line[column - 2:column] == "  " and line[column] != " " for line in starts), "descriptions start in one column"
    assert all(line.startswith(" " * column) and line[column] != " " for line in lines if not line.startswith("mutant.")), \
        "a continuation line is indented to the description column"
    summaries = {name: mutant_summary(resolve_engine(name)) for name in names}
    assert all(s.endswith(".") for s in summaries.values()), "whole sentences, not the docstring's first line"
    printed = " ".join(" ".join(line.split()[1:] if line.startswith("mutant.") else line.split()) for line in lines)
    assert all(s in printed for s in summaries.values()), "every description printed whole"
    narrow = mutant_table(summaries, width=70).splitlines()
    assert max(map(len, narrow)) <= 70


def test_an_unknown_engine_gets_the_closest_names_not_all(tmp_path, capsys):
    assert main(["run", "--engine", "mutant.ga-mean", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "did you mean mutant.ga-mean-of-means" in err and "packcheck list engines" in err
    assert sum(name in err for name in engine_names()) <= 3, err
    assert main(["run", "--engine", "my_engine.label_bug", "--out", str(tmp_path)]) == 2, "a class's name, not a spec"
    assert "pass its class as 'package.module:Class'" in capsys.readouterr().err


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_bisect_with_good_failing_and_bad_passing_suggests_a_swap(tmp_path, capsys):
    """The endpoints' outcomes come from the cache (what earlier bisects judged), so nothing runs."""
    repo = tmp_path / "engine"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    commits = []
    for n in range(2):
        (repo / "engine.py").write_text(f"# version {n}\n")
        _git(repo, "add", "--all")
        _git(repo, "commit", "--quiet", "-m", f"version {n}")
        commits.append(_git(repo, "rev-parse", "HEAD"))
    probe = Probe(engine="engine:Engine", families=("llama",), scenarios=("mask_alignment",))
    cache = VerdictCache(tmp_path / "cache.json")
    cache.put(probe.key(commits[0], "llama"), Outcome(status=BAD, failing=("mask_alignment",)))
    cache.put(probe.key(commits[1], "llama"), Outcome(status=GOOD))
    code = main(["bisect", "--repo", str(repo), "--good", commits[0], "--bad", commits[1], "--engine", "engine:Engine",
                 "--family", "llama", "--scenario", "mask_alignment", "--cache", str(cache.path)])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert "--good and --bad swapped?" in captured.out.splitlines()[1]
    assert "llama fails at --good" in captured.err and "did you swap them?" in captured.err
