"""Engines that write outside their own launch folder (tests/engines/beyond_launch.py) against `packcheck run`: confined
by a mount namespace (PACKCHECK_CONFINE=auto; userns: the user-namespace path), and unconfined (off: the run's checks
alone, as on a machine that allows neither). Either way each such engine is not green, the reference is, and the
installed reference is as it was after the run (docs/isolation.md).

The runs import a copy of packcheck's package folders (first on PYTHONPATH, a fresh interpreter), so that an engine
that rewrites the installed reference rewrites the copy: no test beside these in this checkout can import a tampered
reference, and the copy is written back in a `finally` whatever happens. Below them, confine.py's system calls alone,
in a fork: what a confined process can and cannot write.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from packcheck.harness.launch.confine import enter
from packcheck.harness.launch.protected import PACKAGES, package_folders
from tests.machine_load import stretched

TESTS = Path(__file__).parent
BEYOND = "tests.engines.beyond_launch:"
FAILING_MUTANT = "mutant.cross-doc-attention"  # fails packed_vs_unpacked on llama: its arms are saved
# auto is what a run takes; userns and off (no confinement: the run's own watch of the files alone) are nox -s slow's
MODES = ["auto", pytest.param("userns", marks=pytest.mark.slow), pytest.param("off", marks=pytest.mark.slow)]


@pytest.fixture
def packcheck_copy(tmp_path) -> Path:
    """A folder holding packcheck/<harness, impls, conformance, fixtures> copied from this checkout."""
    site = tmp_path / "site"
    for folder in package_folders():
        shutil.copytree(folder, site / "packcheck" / folder.name, ignore=shutil.ignore_patterns("__pycache__", "*.obtained"))
    assert sorted(p.name for p in (site / "packcheck").iterdir()) == sorted(PACKAGES)
    return site


def run_from(site: Path, *args: str, cwd: Path, mode: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PACKCHECK_CONFINE": mode, "PYTHONPATH": os.pathsep.join([str(site), str(TESTS.parent)])}
    return subprocess.run([sys.executable, "-m", "packcheck.harness.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=stretched(900))


@pytest.mark.parametrize("mode", MODES)
def test_an_engine_that_writes_outside_its_launch_is_not_green_and_the_reference_is(tmp_path, packcheck_copy, mode):
    config = packcheck_copy / "packcheck" / "impls" / "reference" / "model" / "config.py"
    original = config.read_bytes()
    out = tmp_path / "out"
    # the reference first: unconfined, RewritesOracleCase's thread rewrites every case file of every launch while its
    # own launch is warm, the reference's included, and the run says so (an error naming the engines alive)
    engines = ["reference", FAILING_MUTANT,
               *(BEYOND + name for name in ("RewritesReference", "RewritesOracleCase", "OverwritesSavedArms"))]
    try:
        done = run_from(packcheck_copy, "run", "--engine", *engines, "--family", "llama", "--scenario", "packed_vs_unpacked",
                        "oracle_agreement", "--out", str(out), cwd=tmp_path, mode=mode)
    finally:
        left = config.read_bytes()
        config.write_bytes(original)
    statuses = {(v["engine_spec"], v["scenario"]): v["status"] for v in json.loads((out / "results.json").read_text())["verdicts"]}
    refused = "engine processes ran without a mount namespace" in done.stderr  # a machine that allows none: said, and checked
    unconfined = mode == "off" or refused
    assert statuses[("reference", "packed_vs_unpacked")] == statuses[("reference", "oracle_agreement")] == "pass", done.stderr
    assert statuses[(BEYOND + "RewritesReference", "oracle_agreement")] == "fail", done.stderr
    assert statuses[(BEYOND + "RewritesOracleCase", "oracle_agreement")] in ("fail", "error"), done.stderr
    assert statuses[(BEYOND + "OverwritesSavedArms", "packed_vs_unpacked")] == "pass" or unconfined, done.stderr
    assert left == original, "the installed reference is as it was once the run has ended"
    assert done.returncode == 1, done.stderr
    saved = sorted((out / "cases").rglob("result.safetensors"))
    assert saved, "the failing mutant's arms are saved"
    if unconfined:
        assert refused == (mode != "off"), "off is asked for: nothing to warn of; refused: said once"
        assert f"the file {config} was changed while this run ran" in done.stderr and "restored" in done.stderr
        lost = [line for line in done.stderr.splitlines() if "the saved arms in" in line]
        assert lost and all(BEYOND + "OverwritesSavedArms" in line for line in lost), done.stderr
        assert "case.json was changed after packcheck wrote it" in done.stderr and BEYOND + "RewritesOracleCase" in done.stderr
    else:
        assert "warning" not in done.stderr, done.stderr
        assert all(load_file(str(path)) for path in saved), "another engine's saved arms are whole"


def confined_writes(tmp_path: Path, mode: str) -> tuple[str, dict[str, str]]:
    """In a fork confined as `mode` says, with tmp_path/protected read-only but for tmp_path/protected/launch: how it
    was confined, and what writing a file in each folder did."""
    protected, launch = tmp_path / "protected", tmp_path / "protected" / "launch"
    launch.mkdir(parents=True)
    said_read, said_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        said = enter({"mode": mode, "device": "cpu", "read_only": [str(protected)], "writable": str(launch)})
        found = {}
        for folder in (protected, launch, tmp_path):
            try:
                (folder / "written").write_text("x")
                found[folder.name] = "written"
            except OSError as err:
                found[folder.name] = err.strerror
        os.write(said_write, json.dumps([said, found]).encode())
        os._exit(0)
    os.close(said_write)
    with os.fdopen(said_read) as said:
        text = said.read()
    os.waitpid(pid, 0)
    said, found = json.loads(text)
    return said, found


@pytest.mark.parametrize("mode,how", [("auto", "mount namespace"), ("userns", "user and mount namespace")])
def test_a_confined_process_writes_only_its_launch_folder_and_the_host_sees_no_mount(tmp_path, mode, how):
    said, found = confined_writes(tmp_path, mode)
    if said.startswith("not confined"):
        pytest.skip(f"this machine allows no {how}: {said}")
    assert said == how
    assert found == {"protected": "Read-only file system", "launch": "written", tmp_path.name: "written"}
    assert not (tmp_path / "protected" / "written").exists() and (tmp_path / "protected" / "launch" / "written").exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(tmp_path) not in mounts, "the namespace's mounts stay in it"


def test_off_confines_nothing(tmp_path):
    said, found = confined_writes(tmp_path, "off")
    assert said == "off" and set(found.values()) == {"written"}
