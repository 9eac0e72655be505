"""A packcheck installed from a checkout (not editable) reports the commit it was built from (issue 45, item 11): its
site-packages copy has no .git, so the build writes the checkout's commit into it (setup.py) and every run's provenance
reads it back (harness/provenance.py, git_commit). The wheel is built as `pip install /path/to/checkout` builds it, from a
fresh clone of this checkout's HEAD."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from packcheck.harness.provenance import BUILD_COMMIT, git_commit

ROOT = Path(__file__).resolve().parents[1]


def test_a_wheel_built_from_a_checkout_reports_its_commit(tmp_path):
    pytest.importorskip("setuptools", reason="the wheel is built without build isolation, by this environment's setuptools")
    source = tmp_path / "checkout"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(source)], check=True, timeout=120)
    commit = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"),
                    str(source)], check=True, timeout=300, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("packcheck-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)

    assert (site / "packcheck" / "harness" / BUILD_COMMIT).read_text().strip() == commit
    assert git_commit(site / "packcheck") == commit, "the installed copy's provenance names the commit it was built from"
    assert git_commit(tmp_path) == "unknown", "a folder that is neither a checkout nor an installed copy stays unknown"
