"""`packcheck bisect` on a real git repository: a toy engine (the reference with two switchable
packing bugs) breaks llama at one commit (cross-document attention) and the hybrid qwen3_5 at a
later one (GatedDeltaNet state carried across packed documents), with a commit in between that
does not even import. Bisect must name each family's first bad commit, say of a family that did
not regress in a range that it did not, judge nothing twice (a second bisect is answered from the
cache), and leave the user's checkout exactly as it was.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.forked import python
from tests.machine_load import load_note, stretched

pytestmark = pytest.mark.xdist_group("bisect")  # the module shares expensive session fixtures: one worker

ENGINE = '''"""A toy engine under development: the reference trainer with switchable packing bugs."""

from packcheck.harness.contract import LayoutKind
from packcheck.impls.mutants.linear_attn_state_leak import one_sequence_per_row
from packcheck.impls.reference.engine import ReferenceEngine
from packcheck.impls.reference.model.linear_attention import get_linear_attention_backend

CROSS_DOC_FAMILIES = frozenset({{{families}}})  # packed rows of these families go through plain causal SDPA
ROW_STATE = {row_state}  # linear-attention layers see each packed row as one sequence (no per-document state reset)


class ToyEngine(ReferenceEngine):
    name = "toy"

    def attention_backend(self, case):
        if case.layout.kind is LayoutKind.PACKED and case.model.family in CROSS_DOC_FAMILIES:
            return "sdpa_causal"
        return super().attention_backend(case)

    def linear_attention_backend(self, case):
        backend = super().linear_attention_backend(case)
        return one_sequence_per_row(get_linear_attention_backend(backend)) if ROW_STATE else backend
'''
# (subject, files written by the commit); the engine is toy/engine.py, imported as toy.engine:ToyEngine.
HISTORY = (
    ("Add the toy engine", {"toy/__init__.py": "", "toy/engine.py": ENGINE.format(families="", row_state=False)}),
    ("Document the engine", {"README.md": "# toy\n\nA packed-training engine.\n"}),
    ("Use causal SDPA for packed llama rows (faster)", {"toy/engine.py": ENGINE.format(families='"llama"', row_state=False)}),
    ("Refactor the engine (does not import)", {"toy/engine.py": ENGINE.format(families='"llama"', row_state=False) + "\nthis is not python\n"}),
    ("Fix the refactor", {"toy/engine.py": ENGINE.format(families='"llama"', row_state=False)}),
    ("Run linear attention one sequence per row (fewer kernel launches)", {"toy/engine.py": ENGINE.format(families='"llama"', row_state=True)}),
    ("Update the docs", {"README.md": "# toy\n\nA packed-training engine, now faster.\n"}),
)
LLAMA_BREAKS, HYBRID_BREAKS = 2, 5
BROKEN = (("llama", LLAMA_BREAKS), ("qwen3_5", HYBRID_BREAKS))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Toy Dev", "-c", "user.email=dev@toy", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def build_toy_repository(repo: Path) -> list[str]:
    """The repository of HISTORY; returns its commit hashes, oldest first."""
    repo.mkdir(parents=True)
    _git(repo, "init", "--quiet", "--initial-branch=main")
    commits = []
    for subject, files in HISTORY:
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        _git(repo, "add", "--all")
        _git(repo, "commit", "--quiet", "-m", subject)
        commits.append(_git(repo, "rev-parse", "HEAD"))
    return commits


def _state(repo: Path) -> dict:
    """Everything of the user's checkout that bisect must leave alone."""
    return {
        "head": _git(repo, "rev-parse", "HEAD"), "branch": _git(repo, "symbolic-ref", "HEAD"),
        "status": _git(repo, "status", "--porcelain"), "diff": _git(repo, "diff"), "staged": _git(repo, "diff", "--cached"),
        "worktrees": _git(repo, "worktree", "list", "--porcelain"), "bisect_refs": _git(repo, "for-each-ref", "refs/bisect"),
    }


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves other modules
def toy(tmp_path_factory):
    """The toy repository with work in progress, bisected once; its state before, the output, the cache."""
    root = tmp_path_factory.mktemp("bisect")
    repo = root / "toy"
    commits = build_toy_repository(repo)
    (repo / "README.md").write_text("an uncommitted edit\n")  # the user's work in progress
    (repo / "notes.txt").write_text("staged\n")
    _git(repo, "add", "notes.txt")
    before = _state(repo)
    command = ["bisect", "--repo", str(repo), "--good", commits[0], "--bad", "main", "--engine", "toy.engine:ToyEngine",
               "--family", "llama", "qwen3_5", "--scenario", "packed_vs_unpacked", "--cache", str(root / "cache.json"), "--allow-dirty",
               "--history", str(root / "history.sqlite")]
    out, err = _bisect(command)
    return {"repo": repo, "commits": commits, "before": before, "command": command, "out": out, "err": err, "root": root}


def _bisect(command: list[str], expected_exit: int = 0) -> tuple[str, str]:
    """packcheck bisect in a subprocess, as a user runs it (its steps write to the terminal, not to pytest)."""
    done = subprocess.run(python("-m", "packcheck.harness.cli.main", *command), capture_output=True, text=True,
                          timeout=stretched(300))
    assert done.returncode == expected_exit, done.stderr
    return done.stdout, done.stderr


def test_bisect_names_each_familys_first_bad_commit(toy):
    commits, out = toy["commits"], toy["out"]
    table = {line.split()[0]: line for line in out.splitlines()[1:]}
    for family, k in BROKEN:
        assert table[family].split()[1] == commits[k][:12] and f" {HISTORY[k][0]} " in table[family], out
        assert table[family].endswith(" packed_vs_unpacked")
    assert f"@ {commits[3][:12]}: skip: cannot be judged" in toy["err"], "the commit that does not import is skipped"


def test_the_users_checkout_is_untouched(toy):
    assert _state(toy["repo"]) == toy["before"], "working tree, index, HEAD, worktrees and bisect refs as they were"
    scratch = re.search(r"in scratch worktree (\S+)", toy["err"]).group(1)  # this bisect's own (others may run beside it)
    assert not Path(scratch).exists(), "the scratch worktree is removed"


def test_every_revision_is_judged_once(toy):
    judged = [line.split(" @ ")[1].split(":")[0] for line in toy["err"].splitlines() if " @ " in line and "[cached]" not in line]
    assert len(judged) == len(set(judged)), "a (family, commit) judged twice"
    started = time.monotonic()
    out, err = _bisect(toy["command"])
    assert out == toy["out"]
    steps = [line for line in err.splitlines() if " @ " in line]
    assert steps and all(line.endswith("[cached]") for line in steps), "a second bisect is answered from the cache"
    assert time.monotonic() - started < stretched(30), load_note()


def test_every_probe_lands_in_the_history_store_and_its_page(toy, tmp_path):
    """Each revision the bisect judged is one run of the store (source bisect, the engine's commit the one judged, its
    verdicts), and `packcheck history` lists the bisect's commits."""
    from packcheck.harness.history import Store

    probed = {line.split(" @ ")[1].split(":")[0].split()[0] for line in toy["err"].splitlines() if " @ " in line and "[cached]" not in line}
    history = Store(toy["root"] / "history.sqlite").read()
    bisect = history.runs[history.runs["source"] == "bisect"]
    assert {note.rsplit(" at ", 1)[1] for note in bisect["note"]} >= probed and len(probed) >= 4, (probed, list(bisect["note"]))
    judged = history.verdicts[history.verdicts["run_id"].isin(bisect["id"])]
    assert {c[:12] for c in judged["engine_commit"]} >= probed - {toy["commits"][3][:12]}, "every judged revision's verdicts, at its commit"
    bad = judged[(judged["family"] == "llama") & (judged["engine_commit"] == toy["commits"][LLAMA_BREAKS])]
    assert list(bad["status"]) == ["fail"], "the first bad commit's llama verdict, as judged"
    out, _ = _bisect(["history", "--store", str(toy["root"] / "history.sqlite"), "--out", str(tmp_path), "--markdown", str(tmp_path / "h.md")])
    page = (tmp_path / "history.html").read_text()
    assert "Bisect probes" in page and all(commit in page for commit in probed)
    # along the history (not in the order the bisect judged them), each family's margin steps up once: from the last good
    # commit it judged (the one before the first bad) to its first bad commit
    steps = [line for line in (tmp_path / "h.md").read_text().splitlines() if line.startswith("| S")]
    assert len(steps) == 2, steps
    for family, k in BROKEN:
        line = next(step for step in steps if f"/ {family} /" in step)
        assert f"| {toy['commits'][k - 1][:8]} -> {toy['commits'][k][:8]} |" in line and " up**" in line, line


def _refused(command: list[str], capsys) -> str:
    """A bisect refused before anything is judged: main() in this process (no interpreter to start); its error line."""
    from packcheck.harness.cli.main import main

    capsys.readouterr()
    assert main(command) == 2
    return capsys.readouterr().err


def _with(command: list[str], **values: str) -> list[str]:
    """The command with the values of some flags replaced: _with(command, good=rev, family="llama")."""
    command = list(command)
    for flag, value in values.items():
        start = command.index(f"--{flag}") + 1
        stop = next((i for i in range(start, len(command)) if command[i].startswith("--")), len(command))
        command[start:stop] = [value]
    return command


def test_families_that_did_not_regress_in_the_range_are_not_bisected(toy, capsys):
    command, commits = toy["command"], toy["commits"]
    out, _ = _bisect(_with(command, bad=commits[1], family="llama"))
    assert out.splitlines()[1].split()[:3] == ["llama", "not", "regressed"]
    out, _ = _bisect(_with(command, good=commits[LLAMA_BREAKS], family="llama"), expected_exit=1)  # undecided
    assert out.splitlines()[1].split()[:3] == ["llama", "already", "bad"]
    err = _refused(_with(command, bad="no-such-rev"), capsys)
    assert "'no-such-rev' is not a commit" in err
    assert _state(toy["repo"]) == toy["before"]


def test_a_range_that_cannot_mean_anything_is_refused(toy, capsys):
    command, commits = toy["command"], toy["commits"]
    err = _refused(_with(command, good=commits[2], bad=commits[2]), capsys)
    assert "are the same commit" in err and "Traceback" not in err
    err = _refused(_with(command, good=commits[-1], bad=commits[0]), capsys)
    assert "is not an ancestor" in err and "they look swapped" in err
    err = _refused([arg for arg in command if arg != "--allow-dirty"], capsys)
    assert "has uncommitted changes (2 files)" in err and "--allow-dirty" in err
    assert _state(toy["repo"]) == toy["before"]


def test_a_step_that_cannot_import_packcheck_stops_the_bisection(tmp_path):
    """git bisect run reads exit 1 as "bad": a step whose interpreter lacks packcheck (-S: no
    site-packages) must exit 255, which stops the bisection, not Python's 1."""
    from packcheck.harness.bisect.step import BOOTSTRAP

    done = subprocess.run([sys.executable, "-I", "-S", "-c", BOOTSTRAP, "--family", "llama"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 255 and "No module named 'packcheck'" in done.stderr
