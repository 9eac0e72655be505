"""What README.md and docs/adapters.md tell a new adapter author holds (issue 29): packcheck installs from a
checkout, a git URL or a wheel (it is not on PyPI); the CI recipe is one pytest run that leaves the run directory,
with no dtype flag; the bug list they name is in the repository; README says what a positions-not-reset pass means."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packcheck.harness.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
FIRST_READ = ("README.md", "docs/adapters.md")


def test_no_first_read_doc_installs_packcheck_from_pypi():
    for name in FIRST_READ:
        text = (ROOT / name).read_text()
        from_pypi = [line for line in text.splitlines() if re.search(r"pip install (?:[-\w=.<>]+ )*packcheck(?:\s|$)", line)]
        assert not from_pypi, f"{name}: `pip install packcheck` finds nothing on PyPI: {from_pypi}"
        assert "packcheck @ git+" in text and "OWNER" in text and ".whl" in text, f"{name} says how to install from a URL and a wheel"


def test_the_ci_recipe_is_one_pytest_run_with_its_run_directory_and_no_dtype_flag():
    sys.path.insert(0, str(ROOT / "tests" / "installed"))
    try:
        from check_wheel import RECIPE_OUT, ci_recipe
    finally:
        sys.path.remove(str(ROOT / "tests" / "installed"))
    steps = ci_recipe()
    gates = [step for step in steps if step.startswith(("pytest ", "packcheck "))]
    assert gates == [f"pytest --pyargs packcheck.conformance --engine my_engine --out {RECIPE_OUT} --tb=line"], steps
    assert not any("--dtype" in step for step in steps), "a float32 engine passes with the default --dtype auto"


def test_the_bug_list_is_in_the_repository_and_named_where_users_look(capsys):
    bugs = (ROOT / "docs" / "bugs.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for bug in ("positions-not-reset", "boundary-label", "ga-mean-of-means", "cross-doc-attention"):
        assert f"| {bug} |" in bugs, bug
    assert "](docs/bugs.md)" in readme and "BUGS.md" not in readme, "README links the bug list it names"
    assert main(["explain", "mask_alignment"]) == 0
    assert "docs/bugs.md" in capsys.readouterr().out


def test_readme_says_what_a_pass_means_for_positions_not_reset():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `packed_vs_unpacked` |"))
    assert "positions-not-reset (where document boundaries come from position resets; see below)" in row
    assert re.search(r"Under RoPE, attention inside a document\s+depends only on relative positions", readme)
