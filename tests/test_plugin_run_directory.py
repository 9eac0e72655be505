"""One pytest run of the conformance suite is the CI gate and the report (issue 29, item 4): `--out DIR` leaves the
run directory `packcheck run --out DIR` leaves, `--scenario` narrows every test, and under `--tb=line` each failure
is one line with its likely cause and the command that reproduces it, a hypothesis property's included, in the short
test summary too where pytest knows it runs on CI (issue 45, item 7); junit.xml counts the failures pytest counts,
the hypothesis properties' included."""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tests.forked import python

ROOT = Path(__file__).resolve().parents[1]


def test_one_pytest_run_writes_the_run_directory_and_one_line_per_failure(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(python("-m", "pytest", "-p", "no:cacheprovider", "conformance", "--engine", "mutant.ga-mean-of-means",
                           "--family", "llama", "--scenario", "microbatch_invariance", "--scenario", "token_conservation", "--tb=line",
                           "--out", str(out)), cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env=os.environ | {"CI": "true"})  # as on a CI runner, where pytest prints every summary line whole
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:] + done.stderr[-3000:]

    verdicts = json.loads((out / "results.json").read_text())["verdicts"]
    assert sorted((v["scenario"], v["status"]) for v in verdicts) == [("microbatch_invariance", "fail"), ("token_conservation", "fail")]
    assert len((out / "results.jsonl").read_text().splitlines()) == 1 + len(verdicts)
    assert "mutant.ga-mean-of-means" in (out / "report.html").read_text()
    assert "microbatch_invariance" in (out / "summary.md").read_text()
    suite = ET.parse(out / "junit.xml").find("testsuite")
    assert len(suite.findall(".//failure")) == int(suite.get("failures")) == 4, "as pytest counts: two cells, the property in two layouts"
    properties = [c.get("name") for c in suite.findall("testcase") if " property " in c.get("name")]
    assert sorted(properties) == [f"microbatch_invariance property test_gradient_is_independent_of_the_partition[llama-{layout}]"
                                  for layout in ("packed", "unpacked")], properties
    assert f"packcheck: 2 verdicts in {out}" in done.stdout
    assert written(out) == written(packcheck_run(tmp_path / "cli")), "both front doors write the same run directory"

    failures = done.stdout.split("= FAILURES =", 1)[1].split("\n", 1)[1].split("packcheck: 2 verdicts", 1)[0].strip().splitlines()
    assert len(failures) == 4, failures  # two scenario cells, the partition property in both layouts; one line each
    for line in failures:
        assert re.search(r"FAIL(:| for )", line) and "| reproduce: " in line, line
    assert sum("property" in line and "test_gradient_is_independent_of_the_partition[llama-" in line for line in failures) == 2, failures
    summary = done.stdout.split("short test summary info", 1)[1].split("\n", 1)[1].strip().splitlines()[:-1]
    assert len(summary) == 4 and all(line.startswith("FAILED ") and "| reproduce: " in line for line in summary), summary
    for noise in ("reproduce_failure", "Comparison(", "assert 'fail' == 'pass'"):
        assert noise not in done.stdout, noise
    assert "deselected" in done.stdout.splitlines()[-1], "the RL property test is left out with rl_loss_aggregation"


def packcheck_run(out: Path) -> Path:
    """`packcheck run` of the same cells, into `out`."""
    from packcheck.harness.cli.main import main

    assert main(["run", "--engine", "mutant.ga-mean-of-means", "--family", "llama", "--scenario", "microbatch_invariance",
                 "token_conservation", "--out", str(out)]) == 1
    return out


def written(out: Path) -> set[str]:
    """The files and folders a run left in `out`: every path, the engine processes' working folders (launches/) by
    their top only."""
    paths = {p.relative_to(out) for p in out.rglob("*")}
    return {str(p) for p in paths if p.parts[0] != "launches" or len(p.parts) == 1}
